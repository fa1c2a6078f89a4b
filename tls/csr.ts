/**
 * Certificate signing requests (design §11.2): the agent makes its own key and
 * sends only a CSR, so its private key never leaves its host; the control
 * plane checks the CSR's signature and key type before it signs anything.
 * The names in the certificate are the control plane's choice (the node's
 * registered addresses), never the CSR's.
 *
 * @module
 */
import * as x509 from "@peculiar/x509";
import { newKeyPair, P256, privateKeyPem } from "./authority.ts";
import { errorMessage } from "../text/error_message.ts";
import { MAX_CSR_CHARS } from "../protocol/fields.ts";

/** The largest CSR accepted, in characters of PEM: the wire's bound (protocol/fields.ts). */
export { MAX_CSR_CHARS };

/** Raised for a CSR that cannot be used; the message says why. */
export class CsrError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "CsrError";
  }
}

/** A new key and a CSR for it: the key stays on the host, the CSR is sent. */
export async function newKeyAndCsr(commonName: string): Promise<{ key: string; csr: string }> {
  const keys = await newKeyPair();
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `CN=${commonName.replace(/[,=+<>#;\\"]/g, "_")}`,
    keys,
    signingAlgorithm: P256,
  });
  return { key: await privateKeyPem(keys.privateKey), csr: csr.toString("pem") };
}

/**
 * The public key of a valid CSR: PEM, a P-256 ECDSA key, and a signature
 * that verifies (the sender holds the key).
 *
 * @throws {CsrError} Saying which check failed.
 */
export async function csrPublicKey(pem: string): Promise<CryptoKey> {
  if (pem.length > MAX_CSR_CHARS) {
    throw new CsrError(`Cannot use the CSR: longer than ${MAX_CSR_CHARS} characters`);
  }
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem);
  } catch (e) {
    throw new CsrError(
      `Cannot use the CSR: not a PEM certificate request (${errorMessage(e)})`,
    );
  }
  const alg = csr.publicKey.algorithm as EcKeyAlgorithm;
  if (alg.name !== "ECDSA" || alg.namedCurve !== "P-256") {
    throw new CsrError(`Cannot use the CSR: its key must be ECDSA P-256, got ${alg.name}`);
  }
  let valid = false;
  try {
    valid = await csr.verify();
  } catch {
    valid = false;
  }
  if (!valid) throw new CsrError("Cannot use the CSR: its signature does not verify");
  return await csr.publicKey.export(P256, ["verify"]);
}
