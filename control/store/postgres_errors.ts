/**
 * PostgreSQL and socket errors in words for llmgw's messages (issue #15):
 * never with the connection URL, which may hold a password.
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

/** A pg or socket error in words, without the URL (which may hold a password). */
export function describe(e: unknown): string {
  const err = e as { code?: unknown; message?: unknown } | null;
  const message = typeof err?.message === "string" ? err.message : String(e);
  switch (err?.code) {
    case "ECONNREFUSED":
      return `connection refused (is PostgreSQL running and listening there?)`;
    case "28P01":
    case "28000":
      return `authentication failed (${message})`;
    case "3D000":
      return `the database does not exist (${message})`;
    default:
      return message;
  }
}
