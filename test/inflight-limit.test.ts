// The in-flight limit of a Redis lane: commands leave in call order while their weights fit in
// max x unit (one always may), the rest wait; a settled or lost command gives its room back.
import { describe, expect, it } from 'vitest';
import { InFlightLimit, NotSentError, OutcomeUnknownError } from '../src/redis/inflight.js';

/** A lane's command that answers when told to; `started` says whether the lane sent it. */
const command = () => {
  let answer!: () => void;
  let fail!: (e: unknown) => void;
  const c = {
    started: false,
    send: () => {
      c.started = true;
      return new Promise<void>((res, rej) => {
        answer = res;
        fail = rej;
      });
    },
    answer: () => answer(),
    fail: (e: unknown) => fail(e),
  };
  return c;
};
const tick = () => new Promise((r) => setImmediate(r));

describe('InFlightLimit', () => {
  it('keeps as many light commands in flight as add up to max x unit, in call order', async () => {
    const lane = new InFlightLimit(2, 60_000, undefined, 100);
    const light = Array.from({ length: 25 }, () => command());
    const done = light.map((c) => lane.run(c.send, 10));
    expect(light.filter((c) => c.started)).toHaveLength(20);
    expect(lane.inFlight).toBe(20);
    expect(lane.queued).toBe(5);
    light[0]!.answer();
    await tick();
    expect(light.filter((c) => c.started)).toHaveLength(21);
    expect(light[20]!.started).toBe(true);
    expect(light[21]!.started).toBe(false);
    for (const c of light) if (c.started) c.answer();
    await tick();
    for (const c of light) if (c.started) c.answer();
    await Promise.all(done);
    expect(lane.inFlight).toBe(0);
  });

  it('a command that does not fit waits, and the lighter ones behind it wait too (order is kept)', async () => {
    const lane = new InFlightLimit(2, 60_000, undefined, 100);
    const a = command();
    const b = command();
    const heavy = command();
    const after = command();
    const pa = lane.run(a.send, 100);
    const pb = lane.run(b.send, 60);
    const ph = lane.run(heavy.send, 50);
    const pl = lane.run(after.send, 1);
    expect([a.started, b.started, heavy.started, after.started]).toEqual([true, true, false, false]);
    b.answer();
    await pb;
    await tick();
    expect([heavy.started, after.started]).toEqual([true, true]);
    for (const c of [a, heavy, after]) c.answer();
    await Promise.all([pa, ph, pl]);
  });

  it('without a weight a command takes a whole unit: max commands in flight, as a lane of sends', async () => {
    const lane = new InFlightLimit(2, 60_000, undefined, 2000);
    const cs = Array.from({ length: 3 }, () => command());
    const ps = cs.map((c) => lane.run(c.send));
    expect(cs.map((c) => c.started)).toEqual([true, true, false]);
    cs[1]!.answer();
    await tick();
    expect(cs[2]!.started).toBe(true);
    cs[0]!.answer();
    cs[2]!.answer();
    await Promise.all(ps);
  });

  it('a weight above the unit counts as one unit', async () => {
    const lane = new InFlightLimit(2, 60_000, undefined, 10);
    const big = command();
    const next = command();
    const third = command();
    const ps = [lane.run(big.send, 1e6), lane.run(next.send, 10), lane.run(third.send, 1)];
    expect([big.started, next.started, third.started]).toEqual([true, true, false]);
    big.answer();
    await tick();
    expect(third.started).toBe(true);
    next.answer();
    third.answer();
    await Promise.all(ps);
  });

  it('failed and lost commands give their room back', async () => {
    const lane = new InFlightLimit(1, 60_000, undefined, 10);
    const a = command();
    const b = command();
    const c = command();
    const pa = lane.run(a.send, 10);
    const pb = lane.run(b.send, 10);
    a.fail(new Error('boom'));
    await expect(pa).rejects.toThrow('boom');
    await tick();
    expect(b.started).toBe(true);
    lane.connectionLost('cut');
    await expect(pb).rejects.toBeInstanceOf(OutcomeUnknownError);
    const pc = lane.run(c.send, 10);
    expect(c.started).toBe(true);
    c.answer();
    await pc;
  });

  it('runWith: the callbacks run once the command settles, never inside the call that queued it, after the lane made room for the next', async () => {
    const lane = new InFlightLimit(1, 60_000, undefined, 1);
    const events: string[] = [];
    let ok!: () => void;
    let fail!: (e: unknown) => void;
    lane.runWith(
      (o, f) => {
        ok = o;
        fail = f;
      },
      1,
      () => events.push('a resolved'),
      (e) => events.push(`a rejected ${String(e)}`),
    );
    const b = command();
    const pb = lane.run(b.send);
    expect(b.started).toBe(false);
    ok();
    // the caller's callback ran synchronously, after the waiting command was started
    expect(events).toEqual(['a resolved']);
    expect(b.started).toBe(true);
    // a second settle of the same command changes nothing
    ok();
    fail(new Error('late'));
    expect(events).toEqual(['a resolved']);
    b.answer();
    await pb;
    expect(lane.inFlight).toBe(0);
  });

  it('runWith: a send that throws, a stall and a lost connection reject from a later microtask, with what happened', async () => {
    const lane = new InFlightLimit(4, 30, undefined, 1);
    const got: unknown[] = [];
    const push = (e: unknown): number => got.push(e);
    lane.runWith(() => {
      throw new Error('send threw');
    }, 1, () => push('resolved'), push);
    expect(got).toEqual([]);
    await tick();
    expect(got).toHaveLength(1);
    expect((got[0] as Error).message).toBe('send threw');

    // sent and never answered: the watchdog fails it as outcome-unknown, then the lane refuses
    lane.runWith(() => undefined, 1, () => push('resolved'), push);
    await new Promise((r) => setTimeout(r, 120));
    expect(got[1]).toBeInstanceOf(OutcomeUnknownError);
    lane.runWith(() => undefined, 1, () => push('resolved'), push);
    expect(got).toHaveLength(2);
    await tick();
    expect(got[2]).toBeInstanceOf(NotSentError);

    const fresh = new InFlightLimit(4, 60_000, undefined, 1);
    fresh.runWith(() => undefined, 1, () => push('resolved'), push);
    fresh.connectionLost('cut');
    expect(got).toHaveLength(3);
    await tick();
    expect(got[3]).toBeInstanceOf(OutcomeUnknownError);
    expect(got).not.toContain('resolved');
  });
});
