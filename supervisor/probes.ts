/**
 * Runs an engine plugin's HTTP checks (design §9.3) against a shard's port.
 *
 * @module
 */
import type { HttpCheck } from "../engines/types.ts";

/** The outcome of one check. */
export interface CheckResult {
  /** The check passed. */
  ok: boolean;
  /** Something answered on the port (even with the wrong status): the process is up. */
  answered: boolean;
  /** What happened, for people. */
  detail: string;
}

/**
 * Runs one check on `host:port` within `timeoutMs`. A model-list check passes
 * only when the body is an OpenAI list whose `data[].id` includes the name.
 */
export async function runHttpCheck(
  host: string,
  port: number,
  check: HttpCheck,
  timeoutMs: number,
  headers?: HeadersInit,
): Promise<CheckResult> {
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}${check.path}`;
  // A fresh connection per check, as kubelet's probes do (DisableKeepAlives): the engines'
  // uvicorn closes a connection idle for 5 s (docs/engine_reference.md §11), and a probe sent
  // on a pooled one as it closes would fail though the engine is fine.
  const sent = new Headers(headers);
  sent.set("connection", "close");
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: sent });
  } catch (e) {
    const why = e instanceof DOMException && e.name === "TimeoutError"
      ? `no answer within ${timeoutMs} ms`
      : "connection refused";
    return { ok: false, answered: false, detail: `GET ${check.path}: ${why}` };
  }
  let body = "";
  try {
    body = await res.text();
  } catch {
    // A body cut short is an answer all the same.
  }
  if (res.status !== check.expect_status) {
    return {
      ok: false,
      answered: true,
      detail: `GET ${check.path}: ${res.status}, expected ${check.expect_status}`,
    };
  }
  if (check.lists_model !== undefined) {
    let ids: unknown[] = [];
    try {
      const data = (JSON.parse(body) as { data?: { id?: unknown }[] }).data;
      ids = Array.isArray(data) ? data.map((m) => m?.id) : [];
    } catch {
      return { ok: false, answered: true, detail: `GET ${check.path}: not a JSON model list` };
    }
    if (!ids.includes(check.lists_model)) {
      return {
        ok: false,
        answered: true,
        detail: `GET ${check.path}: does not list ${check.lists_model} (lists ${
          ids.join(", ") || "nothing"
        })`,
      };
    }
  }
  return { ok: true, answered: true, detail: `GET ${check.path}: ${res.status}` };
}
