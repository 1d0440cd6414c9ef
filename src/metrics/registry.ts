// The prom-client Registry an app hands in, recognised by its shape: the app's own prom-client
// (another version, or a second install of the same one) has its own Registry class, so an
// `instanceof` against hashgate's copy would refuse a perfectly good registry.
import type { Registry } from 'prom-client';

/**
 * What hashgate uses of a prom-client `Registry`. Any Registry of a supported prom-client major
 * (see peerDependencies) fits, whichever copy of the package created it.
 */
export interface RegistryLike {
  readonly contentType: string;
  metrics(): Promise<string>;
  registerMetric(metric: never): void;
  getSingleMetric(name: string): unknown;
  removeSingleMetric(name: string): void;
}

export function isRegistry(v: unknown): v is RegistryLike {
  if (v === null || typeof v !== 'object') return false;
  const r = v as Record<string, unknown>;
  return typeof r['metrics'] === 'function' && typeof r['registerMetric'] === 'function' &&
    typeof r['getSingleMetric'] === 'function' && typeof r['removeSingleMetric'] === 'function' && typeof r['contentType'] === 'string';
}

/** The registry as prom-client's own types see it (it was checked with isRegistry). */
export function asRegistry(r: RegistryLike): Registry {
  return r as unknown as Registry;
}
