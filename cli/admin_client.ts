/**
 * How admin commands reach the control plane: URLs and token from flags,
 * the environment or a token file, the cluster CA from `LLMGW_CA`, and
 * failover across several control planes (design §11.1).
 *
 * @module
 */
import type { z } from "zod";
import { FailoverFetch } from "../http/failover_fetch.ts";
import { readErrorBody } from "../protocol/error_body.ts";
import { parseWire, WireFormatError } from "../protocol/wire_error.ts";
import { readCaFile, TlsMaterialError } from "../tls/authority.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { controlUrlsOf, UsageError } from "./usage_error.ts";
import { errorMessage } from "../text/error_message.ts";

/** Raised when the control plane answers with an error; the message is its message. */
export class AdminError extends Error {
  /** The HTTP status, or null when the control plane could not be reached. */
  readonly status: number | null;
  /** Creates the error. */
  constructor(message: string, status: number | null = null) {
    super(message);
    this.name = "AdminError";
    this.status = status;
  }
}

/** One call to the admin API: resolves to the decoded JSON answer. */
export type AdminCall = (method: string, path: string, body?: unknown) => Promise<unknown>;

/** Where the commands go, and how. */
export interface AdminTarget {
  /** The first control plane's URL, for messages. */
  url: string;
  /** The admin token. */
  token: string;
  /** Trusts the cluster CA only (LLMGW_CA), moving between control planes. */
  fetch: typeof fetch;
}

/** Calls the admin API once. */
export async function adminRequest(
  t: AdminTarget,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  let res: Response;
  try {
    res = await t.fetch(`${t.url.replace(/\/$/, "")}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${t.token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    throw new AdminError(
      `cannot reach the control plane at ${t.url}: ${errorMessage(e)}`,
    );
  }
  const text = await res.text();
  if (!res.ok) {
    const err = readErrorBody(text)?.message;
    throw new AdminError(
      `${method} ${path}: ${res.status}: ${err ?? text.slice(0, 200)}`,
      res.status,
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    // Not JSON: the answer's schema refuses it, naming the call.
    return null;
  }
}

/**
 * Calls the admin API and parses the answer with its protocol schema
 * (protocol/admin_protocol.ts).
 *
 * @throws {AdminError} When the call fails, or the answer is not what the schema says.
 */
export async function adminAnswer<S extends z.ZodType>(
  call: AdminCall,
  schema: S,
  method: string,
  path: string,
  body?: unknown,
): Promise<z.output<S>> {
  const json = await call(method, path, body);
  let parsed: z.output<S>;
  try {
    parsed = parseWire(schema, json, `the answer to ${method} ${path}`);
  } catch (e) {
    if (e instanceof WireFormatError) throw new AdminError(e.message);
    throw e;
  }
  // -o json|yaml print the answer: in the control plane's key order, not the schema's.
  return inOrderOf(json, parsed) as z.output<S>;
}

/**
 * `parsed` with each object's keys in the order `raw` has them (keys only
 * `parsed` has, defaults filled in, last). Values are `parsed`'s.
 */
export function inOrderOf(raw: unknown, parsed: unknown): unknown {
  if (Array.isArray(raw) && Array.isArray(parsed)) {
    return parsed.map((v, i) => inOrderOf(raw[i], v));
  }
  if (!isPlainObject(raw) || !isPlainObject(parsed)) return parsed;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(raw)) if (k in parsed) out[k] = inOrderOf(raw[k], parsed[k]);
  for (const k of Object.keys(parsed)) if (!(k in out)) out[k] = parsed[k];
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The connection flags every admin command takes. */
export interface ConnectionFlags {
  url?: string;
  token?: string;
  "token-file"?: string;
}

function readTokenFile(verb: string, path: string): string {
  try {
    return Deno.readTextFileSync(path).trim();
  } catch (e) {
    throw new UsageError(
      `${verb}: cannot read the token file ${path}: ${errorMessage(e)}`,
    );
  }
}

/**
 * Opens the target from flags and environment; `close` releases the pinned
 * CA's HTTP client.
 *
 * @throws {UsageError} Naming what is missing and how to give it.
 */
export function openAdminTarget(
  verb: string,
  values: ConnectionFlags,
): { target: AdminTarget; close: () => void } {
  // Several URLs, comma-separated (design §11.1): a request moves to the next on a failure.
  const urls = controlUrlsOf(verb, "--url", [
    values.url === undefined ? undefined : [values.url],
    Deno.env.get("LLMGW_URL") ? [Deno.env.get("LLMGW_URL")!] : undefined,
  ]);
  const tokenFile = values["token-file"] ?? (Deno.env.get("LLMGW_TOKEN_FILE") || undefined);
  const token = values.token ?? (Deno.env.get("LLMGW_TOKEN") || undefined) ??
    (tokenFile === undefined ? undefined : readTokenFile(verb, tokenFile));
  if (urls.length === 0) {
    throw new UsageError(`${verb}: no control plane: set LLMGW_URL or pass --url`, verb);
  }
  if (token === undefined) {
    throw new UsageError(
      `${verb}: no admin token: set LLMGW_TOKEN or LLMGW_TOKEN_FILE, or pass --token-file`,
      verb,
    );
  }
  const caFile = Deno.env.get("LLMGW_CA") || undefined;
  let trust: ReturnType<typeof pinnedFetch> | null = null;
  try {
    trust = caFile === undefined ? null : pinnedFetch(readCaFile(caFile));
  } catch (e) {
    if (e instanceof TlsMaterialError) throw new UsageError(`${verb}: LLMGW_CA: ${e.message}`);
    throw e;
  }
  // A command that only reads moves past a silent control plane after 5 s.
  const failover = new FailoverFetch(urls, trust?.fetch ?? fetch, () => {}, {
    readAttemptTimeoutMs: 5_000,
  });
  return { target: { url: urls[0], token, fetch: failover.fetch }, close: () => trust?.close() };
}
