export { Blacklist, BLACKLIST_DEFAULTS, BLACKLIST_FAMILIES, blacklistRowKey } from './blacklist.js';
export type { BlacklistEntry, BlacklistKey, BlacklistOptions, BlacklistRecord, BlacklistStats } from './blacklist.js';
export { BehaviorHistory, HISTORY_DEFAULTS, HISTORY_FAMILY, historySplitKeys } from './history.js';
export type { BehaviorEvent, HistoryOptions, HistoryQuery, StoredEvent } from './history.js';
export { RiskCheck, RISK_CHECK_DEFAULTS, riskRowKey } from './risk-check.js';
export type { RiskCheckOptions, RiskRecord } from './risk-check.js';
