export { HotColdStore, TIERING_DEFAULTS } from './hot-cold.js';
export type { HotColdOptions, MigrateOptions, MigrateResult, TieringMode, WriteEntry, WriteResult } from './hot-cold.js';
