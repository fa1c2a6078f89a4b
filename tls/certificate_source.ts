/**
 * Where a server's certificate comes from, and keeping it fresh without a
 * restart (design §11.2): a server asks its source again every so often and
 * swaps in a certificate that changed. Sources: files an operator (or
 * cert-manager, or an ACME client) rewrites, and certificates the cluster CA
 * issues in-process, renewed two thirds into their life.
 *
 * @module
 */
import { notAfter, notBefore, readCertificate, TlsMaterialError } from "./authority.ts";
import type { ServingCertificate } from "./https_server.ts";
import { errorMessage } from "../text/error_message.ts";

/** The fraction of a certificate's life after which llmgw renews it. */
export const RENEW_AFTER_FRACTION = 2 / 3;

/** When a certificate is due for renewal (ms since epoch): two thirds into its life. */
export function renewalDueAt(certPem: string): number {
  const from = notBefore(certPem);
  return from + (notAfter(certPem) - from) * RENEW_AFTER_FRACTION;
}

/** Gives the certificate a server should use now. */
export interface CertificateSource {
  /** What the source is, for messages (a file name, "issued by the cluster CA"). */
  readonly what: string;
  /**
   * The certificate to use now.
   *
   * @throws {TlsMaterialError} When it cannot be read or used.
   */
  load(): Promise<ServingCertificate>;
}

/** A certificate and key in PEM files, read anew at each check. */
export function fileCertificate(certFile: string, keyFile: string): CertificateSource {
  return {
    what: `${certFile} and ${keyFile}`,
    load() {
      const read = (path: string, what: string) => {
        try {
          return Deno.readTextFileSync(path);
        } catch (e) {
          throw new TlsMaterialError(
            `Cannot read the ${what} ${path}: ${errorMessage(e)}`,
          );
        }
      };
      const cert = read(certFile, "certificate");
      readCertificate(cert, `the certificate ${certFile}`);
      return Promise.resolve({ cert, key: read(keyFile, "key") });
    },
  };
}

/**
 * A certificate issued by `issue`, renewed once two thirds of its life are
 * gone (the same one is returned until then).
 */
export function issuedCertificate(
  what: string,
  issue: () => Promise<ServingCertificate>,
  clock: () => number = Date.now,
): CertificateSource {
  let current: ServingCertificate | null = null;
  return {
    what,
    async load() {
      if (current !== null && clock() < renewalDueAt(current.cert)) return current;
      current = await issue();
      return current;
    },
  };
}

/**
 * Checks `source` every `everyMs` and calls `swap` with a certificate whose
 * PEM differs from the last one; a failed check is reported to `problem` and
 * the server keeps what it has. Returns the function that stops checking.
 */
export function watchCertificate(
  source: CertificateSource,
  first: ServingCertificate,
  everyMs: number,
  swap: (c: ServingCertificate) => void,
  problem: (message: string) => void,
): () => void {
  let last = first.cert;
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const next = await source.load();
      if (next.cert !== last) {
        swap(next);
        last = next.cert;
      }
    } catch (e) {
      problem(
        `cannot renew the certificate from ${source.what}: ${errorMessage(e)}`,
      );
    } finally {
      busy = false;
    }
  }, everyMs);
  return () => clearInterval(timer);
}
