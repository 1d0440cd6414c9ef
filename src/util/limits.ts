// Limits shared by the library and the bulk loader, so a key the loader stores can always be
// queried: one definition, read by both.

/** Longest key accepted, in UTF-8 bytes: `dedup.maxKeyBytes`' default and the loader's key limit. */
export const MAX_KEY_BYTES = 1024;
