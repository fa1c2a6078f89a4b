/**
 * A small typed HTTP client for the control plane's agent endpoints
 * (design §10, protocol/agent_protocol.ts): register with the join token,
 * then heartbeat and long-poll the desired state with the node token.
 *
 * Every failure is a {@link ControlError} saying what kind it was (HTTP
 * status and the server's `{error: {code, message}}`, network, timeout,
 * a response this agent cannot use); nothing else escapes. Responses are
 * parsed defensively, since the control plane may be another version:
 * unknown fields are ignored, missing optional ones get defaults, and a
 * body that is not what the protocol says is an error, never a crash. A
 * desired state is checked whole, every shard's launch with the protocol's
 * schema (protocol/shard_launch.ts); the error names the shard and the field.
 * Tokens never appear in error messages.
 *
 * @module
 */
import type { z } from "zod";
import { readLimited } from "../http/read_limited.ts";
import {
  type CertificateAnswer,
  CertificateAnswerSchema,
  type DesiredState,
  type HeartbeatRequest,
  HeartbeatResponseSchema,
  parseDesiredState,
  RegisterAnswerSchema,
  type RegisterRequest,
  type RegisterResponse,
} from "../protocol/agent_protocol.ts";
import { readErrorBody } from "../protocol/error_body.ts";
import { describeIssues, WireFormatError } from "../protocol/wire_error.ts";
import { zodIssues } from "../validation/issues.ts";

/** What went wrong with a call. */
export type ControlErrorKind =
  /** The control plane answered with a non-2xx status. */
  | "http"
  /** No answer: connection refused, reset, DNS, TLS. */
  | "network"
  /** No complete answer within the call's deadline. */
  | "timeout"
  /** The caller aborted the call (the agent is stopping, or woke the loop). */
  | "aborted"
  /** A 2xx answer this agent cannot use (not JSON, wrong shape, too large). */
  | "bad_response";

/** A failed control-plane call. */
export class ControlError extends Error {
  /** What went wrong. */
  readonly kind: ControlErrorKind;
  /** The HTTP status, when the control plane answered. */
  readonly status: number | null;
  /** The server's error code (`{error: {code}}`), when it sent one. */
  readonly code: string | null;
  /** The server's error message (`{error: {message}}`), when it sent one. */
  readonly serverMessage: string | null;

  /** Creates the error. */
  constructor(
    kind: ControlErrorKind,
    message: string,
    details: { status?: number; code?: string | null; serverMessage?: string | null } = {},
  ) {
    super(message);
    this.name = "ControlError";
    this.kind = kind;
    this.status = details.status ?? null;
    this.code = details.code ?? null;
    this.serverMessage = details.serverMessage ?? null;
  }

  /** True when the credential was refused (401/403): the agent must register again. */
  get unauthorized(): boolean {
    return this.kind === "http" && (this.status === 401 || this.status === 403);
  }
}

/** The heartbeat interval when the control plane does not say (design §4 default). */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000;

/** Settings of a {@link ControlClient}. */
export interface ControlClientOptions {
  /** The control plane's base URL, e.g. `https://control.example:8443` (a path prefix is kept). */
  url: string;
  /** The join token, sent only to register. */
  joinToken: string;
  /** The node token from an earlier registration, if any. */
  nodeToken?: string | null;
  /** Deadline of a register or heartbeat call, and added to a long poll's wait. Default 10 s. */
  timeoutMs?: number;
  /** The largest response body read. Default 16 MiB. */
  maxBodyBytes?: number;
  /** The fetch to use (tests). Default the global fetch. */
  fetch?: typeof fetch;
}

/** The answer to a heartbeat, parsed defensively. */
export interface HeartbeatResult {
  /** The node's current desired-state generation; null when the control plane did not say. */
  generation: number | null;
  /** Hashes of the live metrics tokens; null when the control plane did not say. */
  metricsTokenHashes: string[] | null;
}

/** Talks to one control plane. */
export class ControlClient {
  readonly #base: URL;
  readonly #joinToken: string;
  #nodeToken: string | null;
  readonly #timeoutMs: number;
  readonly #maxBody: number;
  readonly #fetch: typeof fetch;

  /**
   * Creates a client.
   *
   * @throws {TypeError} When `url` is not an http(s) URL.
   */
  constructor(options: ControlClientOptions) {
    const base = new URL(options.url);
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new TypeError(`control plane URL must be http or https, got ${base.protocol}`);
    }
    if (!base.pathname.endsWith("/")) base.pathname += "/";
    base.search = "";
    base.hash = "";
    this.#base = base;
    this.#joinToken = options.joinToken;
    this.#nodeToken = options.nodeToken ?? null;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#maxBody = options.maxBodyBytes ?? 16 * 1024 * 1024;
    this.#fetch = options.fetch ?? fetch;
  }

  /** The node token in use, if registered. */
  get nodeToken(): string | null {
    return this.#nodeToken;
  }

  /** Sets (or forgets, with null) the node token used after registration. */
  setNodeToken(token: string | null): void {
    this.#nodeToken = token;
  }

  /**
   * Registers the node with the join token (`POST /v1/agent/register`) and
   * keeps the node token it returns for later calls.
   */
  async register(req: RegisterRequest, signal?: AbortSignal): Promise<RegisterResponse> {
    // A node id is bound to its credential at first registration: registering
    // it again proves it with the node token (design §10).
    const body = await this.#call("POST", "v1/agent/register", this.#joinToken, req, {
      timeoutMs: this.#timeoutMs,
      signal,
      extraHeaders: this.#nodeToken === null ? {} : { "x-llmgw-node-token": this.#nodeToken },
    });
    const parsed = RegisterAnswerSchema.safeParse(body);
    if (!parsed.success) throw badShape("register", parsed.error);
    const answer: RegisterResponse = {
      node_id: parsed.data.node_id ?? req.node_id,
      node_token: parsed.data.node_token,
      heartbeat_interval_ms: parsed.data.heartbeat_interval_ms ?? DEFAULT_HEARTBEAT_INTERVAL_MS,
      ...(parsed.data.certificate === undefined ? {} : { certificate: parsed.data.certificate }),
      ...(parsed.data.ca_certificate === undefined
        ? {}
        : { ca_certificate: parsed.data.ca_certificate }),
    };
    this.#nodeToken = answer.node_token;
    return answer;
  }

  /** Asks for a new certificate from a CSR (`POST /v1/agent/certificate`) with the node token. */
  async renewCertificate(csr: string, signal?: AbortSignal): Promise<CertificateAnswer> {
    const body = await this.#call("POST", "v1/agent/certificate", this.#requireNode(), { csr }, {
      timeoutMs: this.#timeoutMs,
      signal,
    });
    const parsed = CertificateAnswerSchema.safeParse(body);
    if (!parsed.success) throw badShape("certificate", parsed.error);
    return parsed.data;
  }

  /** Sends a heartbeat (`POST /v1/agent/heartbeat`) with the node token. */
  async heartbeat(req: HeartbeatRequest, signal?: AbortSignal): Promise<HeartbeatResult> {
    const body = await this.#call("POST", "v1/agent/heartbeat", this.#requireNode(), req, {
      timeoutMs: this.#timeoutMs,
      signal,
    });
    const parsed = HeartbeatResponseSchema.partial().safeParse(body ?? {});
    if (!parsed.success) throw badShape("heartbeat", parsed.error);
    return {
      generation: parsed.data.generation ?? null,
      metricsTokenHashes: parsed.data.metrics_token_hashes ?? null,
    };
  }

  /**
   * Long-polls the desired state (`GET /v1/agent/desired?generation=N&wait_ms=M`):
   * the control plane answers at once when its generation differs from
   * `generation`, else holds the request up to `waitMs`. Returns null when it
   * answered "no change" (204 or 304) instead of repeating the state.
   */
  async desired(
    generation: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<DesiredState | null> {
    const path = `v1/agent/desired?generation=${generation}&wait_ms=${Math.round(waitMs)}`;
    const body = await this.#call("GET", path, this.#requireNode(), undefined, {
      timeoutMs: waitMs + this.#timeoutMs,
      signal,
    });
    if (body === undefined) return null;
    // Checked whole, launches included (protocol/shard_launch.ts): the
    // supervisor must never act on a state it only half understands.
    try {
      return parseDesiredState(body);
    } catch (e) {
      if (!(e instanceof WireFormatError)) throw e;
      throw unusable("desired", e.detail);
    }
  }

  #requireNode(): string {
    if (this.#nodeToken === null) {
      throw new ControlError("http", "not registered: no node token", {
        status: 401,
        code: "not_registered",
      });
    }
    return this.#nodeToken;
  }

  /** One call; returns the parsed JSON body, or undefined for 204/304. */
  async #call(
    method: "GET" | "POST",
    path: string,
    token: string,
    body: unknown,
    opts: { timeoutMs: number; signal?: AbortSignal; extraHeaders?: Record<string, string> },
  ): Promise<unknown> {
    const what = `${method} /${path.split("?")[0]}`;
    if (opts.signal?.aborted) throw new ControlError("aborted", `${what}: aborted`);
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), opts.timeoutMs);
    const onAbort = () => deadline.abort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const failure = (e: unknown): ControlError => {
      if (e instanceof ControlError) return e;
      if (opts.signal?.aborted) return new ControlError("aborted", `${what}: aborted`);
      if (deadline.signal.aborted) {
        return new ControlError("timeout", `${what}: no answer within ${opts.timeoutMs} ms`);
      }
      return new ControlError("network", `${what}: ${describeNetworkError(e)}`);
    };
    try {
      let res: Response;
      try {
        res = await this.#fetch(new URL(path, this.#base), {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            accept: "application/json",
            ...(body === undefined ? {} : { "content-type": "application/json" }),
            ...opts.extraHeaders,
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: deadline.signal,
        });
      } catch (e) {
        throw failure(e);
      }
      let text: string;
      try {
        text = await readBounded(res, this.#maxBody, what);
      } catch (e) {
        throw failure(e);
      }
      if (res.status === 204 || res.status === 304) return undefined;
      if (!res.ok) throw httpError(what, res.status, text);
      if (text.trim() === "") return undefined;
      try {
        return JSON.parse(text);
      } catch {
        throw new ControlError("bad_response", `${what}: answer is not JSON`, {
          status: res.status,
        });
      }
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
    }
  }
}

/** Reads a body, refusing one larger than `max` bytes. */
async function readBounded(res: Response, max: number, what: string): Promise<string> {
  if (res.body === null) return "";
  const bytes = await readLimited(res.body, max);
  if (bytes === null) {
    throw new ControlError("bad_response", `${what}: answer larger than ${max} bytes`, {
      status: res.status,
    });
  }
  return new TextDecoder().decode(bytes);
}

/** A non-2xx answer, with the server's `{error: {code, message}}` when present. */
function httpError(what: string, status: number, text: string): ControlError {
  let code: string | null = null;
  let serverMessage: string | null = null;
  // Not an error body (a proxy's error page, say): the text is shown.
  const body = readErrorBody(text);
  if (body !== null) {
    code = body.code;
    serverMessage = body.message;
  }
  const detail = serverMessage ?? (text.trim().slice(0, 200) || "no body");
  return new ControlError(
    "http",
    `${what}: control plane answered ${status}${code === null ? "" : ` ${code}`}: ${detail}`,
    { status, code, serverMessage },
  );
}

function badShape(what: string, error: z.ZodError): ControlError {
  return unusable(what, describeIssues(zodIssues(error)));
}

function unusable(what: string, detail: string): ControlError {
  return new ControlError(
    "bad_response",
    `${what}: unusable answer from the control plane: ${detail}`,
  );
}

function describeNetworkError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  // fetch wraps the cause ("error sending request … Connection refused").
  const cause = e.cause instanceof Error ? `: ${e.cause.message}` : "";
  return `${e.message}${cause}`.replace(/\s+/g, " ").slice(0, 300);
}
