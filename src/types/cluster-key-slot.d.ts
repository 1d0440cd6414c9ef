// Types of cluster-key-slot (ioredis's own slot function; the package ships none): CRC16 of the
// key (or of its {hash tag}) mod 16384.
declare module 'cluster-key-slot' {
  function calculateSlot(key: string | Buffer): number;
  export default calculateSlot;
}
