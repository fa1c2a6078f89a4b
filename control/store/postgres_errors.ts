/**
 * Which PostgreSQL and socket errors a retry can fix (issue #15); the words
 * for every store error are store_errors.ts's.
 *
 * @module
 */

/** Whether a failure is one a retry can fix (the server unreachable or starting). */
export function transient(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return /timeout|terminat|connect/i.test(String(e));
  // 57P03: the database system is starting up; 08xxx: connection exceptions.
  return ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENOTFOUND", "EAI_AGAIN"]
    .includes(code) || code === "57P03" || code.startsWith("08");
}
