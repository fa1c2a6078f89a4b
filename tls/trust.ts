/**
 * Trusting the control plane (design §11.2), the kubeadm way: a join token
 * carries the SHA-256 of the CA's public key. A joining agent fetches the CA
 * certificate over a connection it does not yet trust, checks the hash, and
 * only then sends anything secret; afterwards every call verifies the server
 * against that CA alone (a pinned `Deno.HttpClient`), never the system's.
 *
 * @module
 */
import https from "node:https";
import { publicKeyHash, readCertificate } from "./authority.ts";
import { errorMessage } from "../text/error_message.ts";

/** Where the CA certificate is served, with no token: it is public. */
export const CA_PATH = "/v1/ca";

/** The largest CA answer read. */
const MAX_CA_BYTES = 64 * 1024;

/** Raised when the control plane cannot be trusted; nothing secret was sent. */
export class TrustError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "TrustError";
  }
}

/**
 * Fetches the CA certificate from `controlUrl` without verifying the server
 * (there is nothing to verify it with yet) and returns it only when its
 * public-key hash is `expectedHash`. No token or other secret is sent.
 *
 * @throws {TrustError} When it cannot be fetched, read, or its hash differs.
 */
export async function fetchPinnedCa(
  controlUrl: string,
  expectedHash: string,
  timeoutMs = 10_000,
): Promise<string> {
  const url = new URL(CA_PATH, controlUrl.endsWith("/") ? controlUrl : `${controlUrl}/`);
  if (url.protocol !== "https:") {
    throw new TrustError(`Cannot pin the CA of ${controlUrl}: the URL must be https://`);
  }
  const text = await new Promise<string>((resolve, reject) => {
    const req = https.get(url, { rejectUnauthorized: false, timeout: timeoutMs }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new TrustError(`GET ${CA_PATH} answered HTTP ${res.statusCode}`));
        return;
      }
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
        if (body.length > MAX_CA_BYTES) req.destroy(new TrustError("the CA answer is too large"));
      });
      res.on("end", () => resolve(body));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new TrustError(`no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
  }).catch((e) => {
    throw e instanceof TrustError ? e : new TrustError(
      `Cannot fetch the CA from ${url.origin}: ${errorMessage(e)}`,
    );
  });
  let pem: string;
  try {
    pem = String((JSON.parse(text) as { ca_certificate?: unknown }).ca_certificate ?? "");
    readCertificate(pem, "the CA certificate");
  } catch {
    throw new TrustError(`Cannot use the CA from ${url.origin}: the answer holds no certificate`);
  }
  const got = await publicKeyHash(pem);
  if (got !== expectedHash.toLowerCase()) {
    throw new TrustError(
      `The control plane at ${url.origin} presents a CA whose key hash is ${got}, ` +
        `not the ${expectedHash} the join token names: refusing to send the token ` +
        `(wrong URL, a stale token, or someone in between)`,
    );
  }
  return pem;
}

/** A client certificate to present. */
export interface ClientCertificate {
  /** PEM certificate. */
  cert: string;
  /** PEM private key. */
  key: string;
}

/**
 * A `fetch` that trusts only `caPem` (and presents `client`, when given).
 * `close` releases its connections.
 */
export function pinnedFetch(
  caPem: string,
  client?: ClientCertificate,
): { fetch: typeof fetch; close(): void } {
  const http = Deno.createHttpClient({
    caCerts: [caPem],
    ...(client === undefined ? {} : { cert: client.cert, key: client.key }),
  });
  return {
    fetch: (input, init) => fetch(input, { ...init, client: http }),
    close: () => http.close(),
  };
}

/**
 * A `fetch` whose trust and client certificate can change while it runs (a
 * renewed certificate): each call uses the newest client.
 */
export class RenewableFetch {
  #current: { fetch: typeof fetch; close(): void };
  #old: { close(): void }[] = [];

  /** Trusts `caPem`, presents `client`. */
  constructor(caPem: string, client?: ClientCertificate) {
    this.#current = pinnedFetch(caPem, client);
  }

  /** The fetch to hand out: it always uses the newest settings. */
  readonly fetch: typeof fetch = (input, init) => this.#current.fetch(input, init);

  /** Uses a new CA or client certificate from the next call on. */
  update(caPem: string, client?: ClientCertificate): void {
    // The client being replaced may still carry requests: it is closed at the
    // next renewal, a renewal period later, so at most one old client is kept.
    for (const c of this.#old) c.close();
    this.#old = [this.#current];
    this.#current = pinnedFetch(caPem, client);
  }

  /** Closes every client. */
  close(): void {
    for (const c of [...this.#old, this.#current]) c.close();
    this.#old = [];
  }
}
