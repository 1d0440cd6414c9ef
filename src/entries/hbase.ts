// Entry point `hashgate/hbase`: the HBase client (an optional peer dependency, loaded when the
// first HBaseStore is built) and the risk tables that live only in HBase: Blacklist,
// BehaviorHistory and RiskCheck. The HBase tiers of other parts are with those parts
// (HBaseColdStore in `hashgate/cache`, HBaseIdStore in `hashgate/ids`).
export { HBaseStore, DEFAULTS as HBASE_DEFAULTS } from '../hbase/client.js';
export type {
  HBaseStoreOptions, HBaseRow, HBaseCell, HBaseCallCounts, Bytes as HBaseBytes, ReadOptions as HBaseReadOptions,
  WriteOptions as HBaseWriteOptions, PutEntry as HBasePutEntry, ScanOptions as HBaseScanOptions,
} from '../hbase/client.js';
export * from '../risk/index.js';
