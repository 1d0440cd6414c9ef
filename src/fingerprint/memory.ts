// Embedded backend for the no-Redis default: exact raw values, so no hashing and no collision
// checks are needed here.
import type { IndexBackend } from './types.js';

const termKey = (attr: string, value: string): string => `${attr}\u0000${value}`;

export class MemoryIndexBackend implements IndexBackend {
  readonly kind = 'memory' as const;
  private readonly sets = new Map<string, Set<string>>();
  private readonly devices = new Map<string, Map<string, string>>();

  async put(deviceId: string, attrs: ReadonlyArray<readonly [string, string]>, mode: 'replace' | 'merge'): Promise<void> {
    let rec = this.devices.get(deviceId);
    if (!rec) {
      rec = new Map();
      this.devices.set(deviceId, rec);
    }
    if (mode === 'replace') {
      const keep = new Set(attrs.map(([a]) => a));
      for (const [a, v] of rec) {
        if (!keep.has(a)) {
          this.unlink(a, v, deviceId);
          rec.delete(a);
        }
      }
    }
    for (const [a, v] of attrs) {
      const old = rec.get(a);
      if (old === v) continue;
      if (old !== undefined) this.unlink(a, old, deviceId);
      rec.set(a, v);
      const k = termKey(a, v);
      let s = this.sets.get(k);
      if (!s) {
        s = new Set();
        this.sets.set(k, s);
      }
      s.add(deviceId);
    }
    if (rec.size === 0) this.devices.delete(deviceId);
  }

  private unlink(attr: string, value: string, deviceId: string): void {
    const k = termKey(attr, value);
    const s = this.sets.get(k);
    if (!s) return;
    s.delete(deviceId);
    if (s.size === 0) this.sets.delete(k);
  }

  async remove(deviceId: string): Promise<boolean> {
    const rec = this.devices.get(deviceId);
    if (!rec) return false;
    for (const [a, v] of rec) this.unlink(a, v, deviceId);
    this.devices.delete(deviceId);
    return true;
  }

  async get(deviceId: string): Promise<Record<string, string> | undefined> {
    const rec = this.devices.get(deviceId);
    return rec ? Object.fromEntries(rec) : undefined;
  }

  async match(terms: ReadonlyArray<readonly [string, string]>, limit: number): Promise<string[]> {
    const sets: Set<string>[] = [];
    for (const [a, v] of terms) {
      const s = this.sets.get(termKey(a, v));
      if (!s) return [];
      sets.push(s);
    }
    // Walk the smallest set and probe the others: cost is |smallest| * (terms-1), and the limit
    // stops the walk early.
    sets.sort((x, y) => x.size - y.size);
    const [first, ...rest] = sets;
    const out: string[] = [];
    if (!first) return out;
    for (const id of first) {
      if (rest.every((s) => s.has(id))) {
        out.push(id);
        if (out.length >= limit) break;
      }
    }
    return out;
  }

  async any(terms: ReadonlyArray<readonly [string, string]>, limit: number): Promise<string[]> {
    const seen = new Set<string>();
    for (const [a, v] of terms) {
      const s = this.sets.get(termKey(a, v));
      if (!s) continue;
      for (const id of s) {
        seen.add(id);
        if (seen.size >= limit) return [...seen];
      }
    }
    return [...seen];
  }

  async forEachValue(fn: (attr: string, value: string) => void): Promise<void> {
    for (const rec of this.devices.values()) for (const [a, v] of rec) fn(a, v);
  }

  async close(): Promise<void> {}
}
