/**
 * The cluster's certificate authority (design §11.2): a P-256 key and a
 * self-signed CA certificate, made by the control plane on its first start.
 * It issues the control plane's serving and client certificates and, from
 * each agent's CSR, the agent's serving certificate. Trust in it is pinned by
 * the SHA-256 of its public key, which join tokens carry ({@link publicKeyHash}).
 *
 * Built on `@peculiar/x509` over WebCrypto: no OpenSSL, nothing to shell out to.
 *
 * @module
 */
import * as x509 from "@peculiar/x509";
import { errorMessage } from "../text/error_message.ts";

x509.cryptoProvider.set(crypto);

/** The signature algorithm of every key and certificate llmgw makes. */
export const P256: EcKeyGenParams & EcdsaParams = {
  name: "ECDSA",
  namedCurve: "P-256",
  hash: "SHA-256",
};

/** Raised when a certificate or key cannot be read or used; says which and why. */
export class TlsMaterialError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "TlsMaterialError";
  }
}

/** What a certificate is for. */
export type CertificateUse = "server" | "client" | "server+client";

/** A certificate to issue. */
export interface CertificateRequest {
  /** The subject's common name (a node id, "llmgw-control"). */
  commonName: string;
  /** The subject's public key. */
  publicKey: CryptoKey;
  /** DNS names it serves. */
  dnsNames?: readonly string[];
  /** IP addresses it serves. */
  ipAddresses?: readonly string[];
  /** What it is for. */
  use: CertificateUse;
  /** Not valid before (ms since epoch); a minute earlier is written, for clock skew. */
  now: number;
  /** Lifetime in ms. */
  lifetimeMs: number;
}

/** PEM text of a certificate and its private key (PKCS#8). */
export interface KeyPairPem {
  /** The certificate, PEM. */
  cert: string;
  /** The private key, PKCS#8 PEM. */
  key: string;
}

const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
/** Certificates start a minute in the past: a peer's clock a little behind still accepts them. */
const SKEW_MS = 60_000;

function serial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] &= 0x7f; // positive
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A new P-256 key pair, extractable so it can be written to a file. */
export function newKeyPair(): Promise<CryptoKeyPair> {
  return crypto.subtle.generateKey(P256, true, ["sign", "verify"]) as Promise<CryptoKeyPair>;
}

/** A private key as PKCS#8 PEM. */
export async function privateKeyPem(key: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

/**
 * Reads a PKCS#8 PEM P-256 private key.
 *
 * @throws {TlsMaterialError} Naming `what` when it is not one.
 */
export async function importPrivateKey(pem: string, what: string): Promise<CryptoKey> {
  try {
    const der = x509.PemConverter.decodeFirst(pem);
    return await crypto.subtle.importKey("pkcs8", der, P256, true, ["sign"]);
  } catch (e) {
    throw new TlsMaterialError(
      `Cannot read ${what}: not a PKCS#8 P-256 private key (${errorMessage(e)})`,
    );
  }
}

/**
 * Reads a PEM certificate.
 *
 * @throws {TlsMaterialError} Naming `what` when it is not one.
 */
export function readCertificate(pem: string, what: string): x509.X509Certificate {
  try {
    return new x509.X509Certificate(pem);
  } catch (e) {
    throw new TlsMaterialError(
      `Cannot read ${what}: not a PEM certificate (${errorMessage(e)})`,
    );
  }
}

/** SHA-256 (hex) of a certificate's SubjectPublicKeyInfo: what join tokens pin (kubeadm's). */
export async function publicKeyHash(certPem: string): Promise<string> {
  const cert = readCertificate(certPem, "the CA certificate");
  const digest = await crypto.subtle.digest("SHA-256", cert.publicKey.rawData);
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** When a PEM certificate stops being valid (ms since epoch). */
export function notAfter(certPem: string): number {
  return readCertificate(certPem, "the certificate").notAfter.getTime();
}

/** When a PEM certificate started being valid (ms since epoch). */
export function notBefore(certPem: string): number {
  return readCertificate(certPem, "the certificate").notBefore.getTime();
}

/** True when `key` is the private half of `cert`'s public key: one probe signed and verified. */
export async function keyMatchesCertificate(
  key: CryptoKey,
  cert: x509.X509Certificate,
): Promise<boolean> {
  const probe = new Uint8Array([1, 2, 3]);
  const sig = await crypto.subtle.sign(P256, key, probe);
  const pub = await cert.publicKey.export(P256, ["verify"]);
  return await crypto.subtle.verify(P256, pub, sig, probe);
}

/**
 * Reads a CA certificate file an operator names (`LLMGW_CA`).
 *
 * @throws {TlsMaterialError} Naming the file when it cannot be read or holds no certificate.
 */
export function readCaFile(path: string): string {
  let pem: string;
  try {
    pem = Deno.readTextFileSync(path);
  } catch (e) {
    throw new TlsMaterialError(
      `Cannot read the CA file ${path}: ${errorMessage(e)}`,
    );
  }
  readCertificate(pem, `the CA file ${path}`);
  return pem;
}

/** The certificate authority: its certificate and the key that signs. */
export class CertificateAuthority {
  /** The CA certificate, PEM: what every peer trusts. */
  readonly certPem: string;
  readonly #cert: x509.X509Certificate;
  readonly #key: CryptoKey;

  private constructor(certPem: string, cert: x509.X509Certificate, key: CryptoKey) {
    this.certPem = certPem;
    this.#cert = cert;
    this.#key = key;
  }

  /** A new CA valid for `lifetimeMs` from `now`. */
  static async create(
    o: { commonName?: string; now: number; lifetimeMs: number },
  ): Promise<{ ca: CertificateAuthority; keyPem: string }> {
    const keys = await newKeyPair();
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: `CN=${o.commonName ?? "llmgw cluster CA"}`,
      notBefore: new Date(o.now - SKEW_MS),
      notAfter: new Date(o.now + o.lifetimeMs),
      keys,
      signingAlgorithm: P256,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
          true,
        ),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    const certPem = cert.toString("pem");
    return {
      ca: new CertificateAuthority(certPem, cert, keys.privateKey),
      keyPem: await privateKeyPem(keys.privateKey),
    };
  }

  /**
   * A CA from its PEM certificate and key.
   *
   * @throws {TlsMaterialError} When either cannot be read or they do not belong together.
   */
  static async load(certPem: string, keyPem: string): Promise<CertificateAuthority> {
    const cert = readCertificate(certPem, "the CA certificate");
    const key = await importPrivateKey(keyPem, "the CA key");
    if (!(await keyMatchesCertificate(key, cert))) {
      throw new TlsMaterialError("Cannot use the CA: its key does not match its certificate");
    }
    return new CertificateAuthority(certPem, cert, key);
  }

  /** When the CA certificate expires (ms since epoch). */
  get notAfter(): number {
    return this.#cert.notAfter.getTime();
  }

  /** Issues a certificate signed by this CA; PEM. */
  async issue(r: CertificateRequest): Promise<string> {
    const names: x509.JsonGeneralName[] = [
      ...(r.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
      ...(r.ipAddresses ?? []).map((value) => ({ type: "ip" as const, value })),
    ];
    const usages = r.use === "server"
      ? [SERVER_AUTH]
      : r.use === "client"
      ? [CLIENT_AUTH]
      : [SERVER_AUTH, CLIENT_AUTH];
    const notAfter = Math.min(r.now + r.lifetimeMs, this.notAfter);
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${r.commonName.replace(/[,=+<>#;\\"]/g, "_")}`,
      issuer: this.#cert.subject,
      notBefore: new Date(r.now - SKEW_MS),
      notAfter: new Date(notAfter),
      signingAlgorithm: P256,
      publicKey: r.publicKey,
      signingKey: this.#key,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension(usages),
        ...(names.length > 0 ? [new x509.SubjectAlternativeNameExtension(names)] : []),
        await x509.AuthorityKeyIdentifierExtension.create(this.#cert),
      ],
    });
    return cert.toString("pem");
  }

  /** Issues a certificate with a fresh key pair; both PEM. */
  async issueWithKey(r: Omit<CertificateRequest, "publicKey">): Promise<KeyPairPem> {
    const keys = await newKeyPair();
    return {
      cert: await this.issue({ ...r, publicKey: keys.publicKey }),
      key: await privateKeyPem(keys.privateKey),
    };
  }
}
