// Removes credentials from connection URLs (and from any text that may embed one) before it is
// printed, logged, thrown or used as a metrics label: ioredis takes a password from the URL's
// user-info (`redis://user:PASSWORD@host`, `redis://:PASSWORD@host`) and from query parameters
// (`?password=...`), so both are masked.

const MASK = '***';

/** Query parameters whose value is a credential (ioredis merges query items into its options). */
const SECRET_PARAMS = /^(password|pass|pwd|passwd|secret|token|auth|access[_-]?key|sentinelpassword)$/i;

// scheme://userinfo@  — userinfo is everything up to the last '@' before the host part.
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#@]*(?:@[^\s/?#@]*)*)@/gi;
// ?password=value / &password=value (stops at &, #, whitespace or a quote)
const QUERY_SECRET = /([?&])([^=&#\s"']+)=([^&#\s"']*)/g;

function maskUserinfo(userinfo: string): string {
  const colon = userinfo.indexOf(':');
  // `user:pass` keeps the user name; a lone component may itself be the password
  return colon >= 0 ? `${userinfo.slice(0, colon)}:${MASK}` : MASK;
}

/**
 * Text with every credential in an embedded URL masked: `redis://u:pw@h:1/0?password=x` becomes
 * `redis://u:***@h:1/0?password=***`. Works on whole messages, not only on bare URLs.
 */
export function redact(text: string): string {
  if (!text.includes('://') && !text.includes('=')) return text;
  let out = text.replace(USERINFO, (_m, scheme: string, info: string) => `${scheme}${maskUserinfo(info)}@`);
  if (out.includes('?')) {
    out = out.replace(QUERY_SECRET, (m, sep: string, key: string) => (SECRET_PARAMS.test(key) ? `${sep}${key}=${MASK}` : m));
  }
  return out;
}

/** A Redis target for output: the URL redacted, or `cluster host:port,...` for cluster nodes. */
export function redactTarget(target: unknown): string {
  if (typeof target === 'string') return redact(target);
  if (target === undefined || target === null) return String(target);
  const t = target as { host?: unknown; port?: unknown; path?: unknown; cluster?: unknown };
  if (Array.isArray(t.cluster)) return `cluster ${t.cluster.map((n) => redactTarget(n)).join(',')}`;
  if (typeof t.path === 'string') return redact(t.path);
  if (t.host !== undefined || t.port !== undefined) return `${String(t.host ?? '127.0.0.1')}:${String(t.port ?? 6379)}`;
  return 'redis';
}
