/**
 * How llmgw tells a PostgreSQL store from a directory, and names one without
 * its secrets (issue #15): every message and log line shows the redacted URL.
 *
 * @module
 */

/** A URL's password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== "") u.password = "***";
    for (const k of [...u.searchParams.keys()]) {
      if (/pass/i.test(k)) u.searchParams.set(k, "***");
    }
    return u.toString();
  } catch {
    return "(a store URL that does not parse)";
  }
}

/** Whether `store` names a PostgreSQL database rather than a directory. */
export function isPostgresUrl(store: string): boolean {
  return /^postgres(ql)?:\/\//i.test(store);
}
