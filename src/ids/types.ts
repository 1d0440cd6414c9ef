export type UpsertStatus = 'new' | 'duplicate' | 'collision';

/** One stored document. `raw` is its canonical JSON; the physical id is unique and never a hash. */
export interface StoredDoc {
  physicalId: string;
  logicalId: string;
  raw: string;
  algorithm: string;
  createdAt: number;
  updatedAt: number;
  /** Stored while another document with a different raw already held this logical id. */
  collision: boolean;
  collisionWith?: string;
}

/** Field names match the collision_record table other services read. Snapshots are the canonical JSON strings. */
export interface CollisionRecord {
  id: string;
  hashId: string;
  algorithm: string;
  doc1Id: string;
  doc2Id: string;
  doc1Snapshot: string;
  doc2Snapshot: string;
  detectedAt: number;
  status: 'pending' | 'resolved';
  resolvedAt: number | null;
  /** 'merged' = same canonical raw (pseudo-collision); 'rehashed' = re-id'd with SHA-256. */
  resolution?: 'merged' | 'rehashed';
  /** physical id -> logical id after repair. */
  newIds?: Record<string, string>;
}

export interface UpsertPlan {
  /** Logical ids to look in: [0] is where a new document goes, the rest are legacy (pre-escalation) ids. */
  lids: string[];
  raw: string;
  physicalId: string;
  collisionId: string;
  algorithm: string;
  now: number;
  /** Config epoch the caller computed `lids` under; a store that knows a newer one answers 'stale'. */
  epoch: number;
}

export type UpsertOutcome =
  | { status: UpsertStatus; physicalId: string; logicalId: string; record?: CollisionRecord }
  | { status: 'redirect' }
  | { status: 'stale'; epoch: number; active: string };

export interface IdStoreStats {
  docs: number;
  collisions: number;
}

export interface IdStoreConfig {
  epoch: number;
  /** '' = the registry's configured algorithm; 'sha256' once escalated. */
  active: string;
}

/** One page of a logical-id listing; `cursor` undefined = the listing is complete. */
export interface IdPage {
  ids: string[];
  cursor: string | undefined;
}

/**
 * Storage behind IdRegistry. `upsert` must be atomic against concurrent upserts from other
 * processes (exactly one 'new' per raw per logical id). The repair primitives are idempotent.
 */
export interface IdStore {
  readonly kind: string;
  upsert(plan: UpsertPlan): Promise<UpsertOutcome>;
  /**
   * Applies `plans` in order, each atomic, and answers one outcome per plan (same order), in one
   * store round trip where the store allows it: the answers must equal those of calling `upsert`
   * on each plan one after another. Rejects as a whole on a store failure (plans before the
   * failure may have been applied). Optional: without it the registry sends one upsert per call.
   */
  upsertMany?(plans: readonly UpsertPlan[]): Promise<UpsertOutcome[]>;
  getDoc(physicalId: string): Promise<StoredDoc | undefined>;
  bucket(lid: string): Promise<{ docs: StoredDoc[]; redirect: boolean }>;
  collisions(): Promise<CollisionRecord[]>;
  collidedLogicalIds(): Promise<string[]>;
  /** Drops `drop` from bucket `lid`; their physical ids resolve to `keep` afterwards. */
  merge(lid: string, keep: string, drop: string[]): Promise<void>;
  /** Moves a document to `newLid` (raw replaced by `raw`), leaving a redirect mark on `lid`. */
  move(lid: string, physicalId: string, newLid: string, raw: string, algorithm: string): Promise<void>;
  resolveCollisions(lid: string, update: (r: CollisionRecord) => CollisionRecord | undefined): Promise<number>;
  clearCollided(lid: string): Promise<void>;
  stats(): Promise<IdStoreStats>;
  config(): Promise<IdStoreConfig>;
  /** Sets active algorithm and bumps the epoch, unless already at `active`. */
  escalate(active: string): Promise<IdStoreConfig>;
  /**
   * Every logical id that has a bucket (redirected ones included), one page per call: pass the
   * previous page's cursor (undefined to start) until it comes back undefined. A page holds about
   * `limit` ids (Redis SCAN treats it as a hint). Ids written during the listing may or may not
   * appear; ids present for the whole listing always do. Optional so stores written before it
   * still type-check; IdRegistry.rebuildGate() needs it.
   */
  listLogicalIds?(cursor: string | undefined, limit: number): Promise<IdPage>;
  close(): Promise<void>;
}
