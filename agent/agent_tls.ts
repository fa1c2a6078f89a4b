/**
 * The agent's side of TLS (design §11.2): which CA it trusts and its own
 * serving certificate.
 *
 * - Trust: `LLMGW_CA` (a file) when given; else the CA pinned on an earlier
 *   start (`<stateDir>/tls/ca.crt`); else the join token's CA hash: the CA
 *   is fetched, its key hash checked, and pinned, before the token is sent.
 * - Its certificate: the agent makes a key and sends only a CSR; the control
 *   plane signs it at registration and on renewal, two thirds into its life.
 *   Until the first one arrives its listeners serve a throwaway self-signed
 *   certificate nobody trusts, so nothing is served in the clear.
 *
 * @module
 */
import { join } from "node:path";
import { tokenParts } from "../protocol/token_format.ts";
import { readSecretFile, writeSecretFile } from "../http/secret_file.ts";
import {
  CertificateAuthority,
  importPrivateKey,
  keyMatchesCertificate,
  type KeyPairPem,
  notAfter,
  readCaFile,
  readCertificate,
} from "../tls/authority.ts";
import { newKeyAndCsr } from "../tls/csr.ts";
import { fetchPinnedCa, RenewableFetch } from "../tls/trust.ts";
import { renewalDueAt } from "../tls/certificate_source.ts";
import type { HttpsRequestInfo } from "../tls/https_server.ts";
import { errorMessage } from "../text/error_message.ts";
import { type Clock, systemClock } from "../time/clock.ts";

/**
 * The local API over TLS: `/v1` (status, logs) needs a client certificate
 * from the cluster CA besides the token; `/healthz` and `/metrics` take a
 * token alone, so Prometheus needs no client certificate.
 */
export function requireClientCertificate(
  req: Request,
  info: HttpsRequestInfo,
  handler: (req: Request) => Response | Promise<Response>,
): Response | Promise<Response> {
  if (info.peerVerified || !new URL(req.url).pathname.startsWith("/v1/")) return handler(req);
  return Response.json({
    error: {
      code: "client_certificate_required",
      message: "this route needs a client certificate from the cluster CA",
    },
  }, { status: 403 });
}

/** Raised when the agent cannot set up TLS; the message says what to do. */
export class AgentTlsError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "AgentTlsError";
  }
}

/** The TLS files in an agent's state directory. */
export function agentTlsPaths(stateDir: string): { ca: string; cert: string; key: string } {
  const dir = join(stateDir, "tls");
  return { ca: join(dir, "ca.crt"), cert: join(dir, "agent.crt"), key: join(dir, "agent.key") };
}

/** Settings of {@link AgentTls.prepare}. */
export interface AgentTlsOptions {
  /** The agent's state directory. */
  stateDir: string;
  /** The control plane's URL. */
  controlUrl: string;
  /** Every control plane's URL (the first is `controlUrl`); the CA is fetched from the first that answers. */
  controlUrls?: readonly string[];
  /** The join token (its fourth part may be the CA hash). */
  joinToken: string;
  /** A CA certificate file the operator gives (`LLMGW_CA`); it wins over everything else. */
  caFile?: string;
  /** A note for the log. */
  log: (message: string, fields?: Record<string, unknown>) => void;
  /** Dates the throwaway certificate and says when renewal is due. Default: the system clock. */
  clock?: Clock;
}

/** The agent's TLS state. */
export class AgentTls {
  /** The CA the agent trusts, PEM. */
  readonly caPem: string;
  /** Calls to the control plane: they trust only that CA. */
  readonly client: RenewableFetch;
  #serving: KeyPairPem;
  #issued: boolean;
  #pendingKey: string | null = null;
  #renewalFailures = 0;
  #renewing = false;
  readonly #paths: ReturnType<typeof agentTlsPaths>;
  readonly #listeners: ((c: KeyPairPem) => void)[] = [];
  readonly #clock: Clock;

  private constructor(
    caPem: string,
    serving: KeyPairPem,
    issued: boolean,
    stateDir: string,
    clock: Clock,
  ) {
    this.caPem = caPem;
    this.#clock = clock;
    this.client = new RenewableFetch(caPem);
    this.#serving = serving;
    this.#issued = issued;
    this.#paths = agentTlsPaths(stateDir);
  }

  /**
   * The TLS of an agent whose control plane URL is https; null for http.
   *
   * @throws {AgentTlsError} When no CA can be trusted, or the control plane presents another.
   */
  static async prepare(o: AgentTlsOptions): Promise<AgentTls | null> {
    if (!o.controlUrl.startsWith("https:")) return null;
    const paths = agentTlsPaths(o.stateDir);
    Deno.mkdirSync(join(o.stateDir, "tls"), { recursive: true, mode: 0o700 });
    const caPem = await trustedCa(o, paths.ca);
    const cert = readText(paths.cert);
    const key = readSecretFile(paths.key);
    const clock = o.clock ?? systemClock;
    if (cert !== null && key !== null && notAfter(cert) > clock.now()) {
      o.log("serving with the stored certificate", {
        expires: new Date(notAfter(cert)).toISOString(),
      });
      return new AgentTls(caPem, { cert, key }, true, o.stateDir, clock);
    }
    // Nothing to serve with yet: a throwaway certificate until the first is signed.
    const { ca } = await CertificateAuthority.create({
      commonName: "llmgw agent (not yet joined)",
      now: clock.now(),
      lifetimeMs: 86_400_000,
    });
    const throwaway = await ca.issueWithKey({
      commonName: "unjoined",
      use: "server",
      now: clock.now(),
      lifetimeMs: 86_400_000,
    });
    return new AgentTls(caPem, throwaway, false, o.stateDir, clock);
  }

  /** The certificate and key the agent serves with now. */
  get serving(): KeyPairPem {
    return this.#serving;
  }

  /** When the serving certificate expires (ms since epoch); null before the first is signed. */
  get notAfterMs(): number | null {
    return this.#issued ? notAfter(this.#serving.cert) : null;
  }

  /** Failed renewals since the agent started. */
  get renewalFailures(): number {
    return this.#renewalFailures;
  }

  /** True when a signed certificate is missing or two thirds through its life. */
  renewalDue(now: number = this.#clock.now()): boolean {
    if (!this.#issued) return true;
    return now >= renewalDueAt(this.#serving.cert);
  }

  /** Calls `f` with each new certificate (the listeners swap it in). */
  onCertificate(f: (c: KeyPairPem) => void): void {
    this.#listeners.push(f);
  }

  /** A CSR for a new key; the key waits, on this host only, for {@link accept}. */
  async csr(commonName: string): Promise<string> {
    const made = await newKeyAndCsr(commonName);
    this.#pendingKey = made.key;
    return made.csr;
  }

  /**
   * Takes a certificate signed from the last CSR: stores it (the key 0600)
   * and hands it to the listeners.
   *
   * @throws {AgentTlsError} When it is not a certificate for the pending key.
   */
  async accept(certPem: string): Promise<void> {
    const key = this.#pendingKey;
    if (key === null) throw new AgentTlsError("a certificate arrived with no CSR outstanding");
    const cert = readCertificate(certPem, "the signed certificate");
    if (!(await keyMatchesCertificate(await importPrivateKey(key, "the agent key"), cert))) {
      throw new AgentTlsError("the signed certificate is not for the key this agent holds");
    }
    this.#pendingKey = null;
    writeSecretFile(this.#paths.key, key);
    Deno.writeTextFileSync(this.#paths.cert, certPem);
    this.#serving = { cert: certPem, key };
    this.#issued = true;
    for (const f of this.#listeners) f(this.#serving);
  }

  /**
   * Renews the certificate unless a renewal is under way: a CSR for a new
   * key, signed by `ask`. A failure is counted (metrics) and reported to
   * `done`; the caller tries again at its next beat.
   */
  renewInBackground(
    ask: (csr: string) => Promise<{ certificate: string }>,
    commonName: string,
    done: (ok: boolean, fields: Record<string, unknown>) => void,
  ): void {
    if (this.#renewing) return;
    this.#renewing = true;
    (async () => {
      try {
        await this.accept((await ask(await this.csr(commonName))).certificate);
        done(true, { expires: new Date(this.notAfterMs!).toISOString() });
      } catch (e) {
        this.#renewalFailures++;
        done(false, {
          error: errorMessage(e),
          expires: this.notAfterMs === null ? null : new Date(this.notAfterMs).toISOString(),
        });
      } finally {
        this.#renewing = false;
      }
    })();
  }

  /** Releases the control plane client. */
  close(): void {
    this.client.close();
  }
}

function readText(path: string): string | null {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return null;
  }
}

async function trustedCa(o: AgentTlsOptions, pinnedPath: string): Promise<string> {
  if (o.caFile !== undefined) return readCaFile(o.caFile);
  const pinned = readText(pinnedPath);
  if (pinned !== null) return pinned;
  const hash = tokenParts(o.joinToken)?.caHash ?? null;
  if (hash === null) {
    throw new AgentTlsError(
      `Cannot trust ${o.controlUrl}: the join token carries no CA hash and no CA is pinned; ` +
        `use a token from "llmgw tokens create join" or set LLMGW_CA to the CA certificate`,
    );
  }
  // Any control plane serves the cluster's one CA: the first that answers and matches the hash.
  let pem: string | null = null;
  const failures: string[] = [];
  for (const url of o.controlUrls ?? [o.controlUrl]) {
    try {
      pem = await fetchPinnedCa(url, hash);
      break;
    } catch (e) {
      failures.push(errorMessage(e));
    }
  }
  if (pem === null) throw new AgentTlsError(failures.join("; "));
  Deno.writeTextFileSync(pinnedPath, pem);
  o.log("pinned the control plane's CA", { path: pinnedPath, ca_hash: hash });
  return pem;
}
