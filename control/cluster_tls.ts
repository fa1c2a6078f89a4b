/**
 * The control plane's TLS (design §11.2): the cluster CA kept in the state
 * directory (`tls/ca.crt`, `tls/ca.key` 0600), the control plane's own
 * certificate (serving its API, and presented as a client certificate when
 * it calls agents), and the agents' certificates signed from their CSRs
 * with the names they registered, never names a CSR asks for.
 *
 * @module
 */
import { isIP } from "node:net";
import { join } from "node:path";
import { writeSecretFile } from "../http/secret_file.ts";
import {
  CertificateAuthority,
  type KeyPairPem,
  publicKeyHash,
  TlsMaterialError,
} from "../tls/authority.ts";
import { type CertificateSource, issuedCertificate } from "../tls/certificate_source.ts";
import { csrPublicKey } from "../tls/csr.ts";
import { type Clock, systemClock } from "../time/clock.ts";

/** How long the CA lasts: ten years; replacing it means re-joining every node. */
export const CA_LIFETIME_MS = 10 * 365 * 86_400_000;

/** How long the control plane's and the agents' certificates last by default. */
export const CERTIFICATE_LIFETIME_MS = 30 * 86_400_000;

/** The CA files in a state directory. */
export function caPaths(stateDir: string): { cert: string; key: string } {
  return { cert: join(stateDir, "tls", "ca.crt"), key: join(stateDir, "tls", "ca.key") };
}

function readIfThere(path: string): string | null {
  try {
    return Deno.readTextFileSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

/**
 * The cluster CA of a state directory, created on the first start; null
 * `stateDir` keeps a new one in memory (tests, `--store :memory:`).
 *
 * @throws {TlsMaterialError} When only one of the two files exists, or they do not match.
 */
export async function loadOrCreateCa(
  stateDir: string | null,
  now: number,
): Promise<{ ca: CertificateAuthority; created: boolean; certPath: string | null }> {
  if (stateDir === null) {
    const { ca } = await CertificateAuthority.create({ now, lifetimeMs: CA_LIFETIME_MS });
    return { ca, created: true, certPath: null };
  }
  const paths = caPaths(stateDir);
  const cert = readIfThere(paths.cert);
  const key = readIfThere(paths.key);
  if (cert !== null && key !== null) {
    return { ca: await CertificateAuthority.load(cert, key), created: false, certPath: paths.cert };
  }
  if (cert !== null || key !== null) {
    throw new TlsMaterialError(
      `Cannot use the CA in ${join(stateDir, "tls")}: ${cert === null ? "ca.crt" : "ca.key"} ` +
        `is missing while the other file is there; restore it from a backup (a new CA would ` +
        `cut off every joined node)`,
    );
  }
  const made = await CertificateAuthority.create({ now, lifetimeMs: CA_LIFETIME_MS });
  Deno.mkdirSync(join(stateDir, "tls"), { recursive: true, mode: 0o700 });
  writeSecretFile(paths.key, made.keyPem);
  Deno.writeTextFileSync(paths.cert, made.ca.certPem);
  return { ca: made.ca, created: true, certPath: paths.cert };
}

/** The cluster TLS of a state directory, and where its CA came from. */
export interface LoadedClusterTls {
  /** The cluster TLS. */
  tls: ClusterTls;
  /** True when the CA was made now (the first start). */
  created: boolean;
  /** The CA certificate's file; null for a CA kept in memory. */
  certPath: string | null;
}

/**
 * The cluster TLS of a control plane (`control serve`, `control init`,
 * `dev`): its state directory's CA, created on the first start (null
 * `stateDir`: in memory), and the control plane reached by `controlHosts`.
 *
 * @throws {TlsMaterialError} When only one of the CA's two files exists, or they do not match.
 */
export async function loadClusterTls(
  stateDir: string | null,
  controlHosts: readonly string[],
  clock: Clock = systemClock,
): Promise<LoadedClusterTls> {
  const { ca, created, certPath } = await loadOrCreateCa(stateDir, clock.now());
  const tls = await ClusterTls.of(ca, controlHosts, CERTIFICATE_LIFETIME_MS, clock);
  return { tls, created, certPath };
}

/** Names a certificate is valid for, split into DNS names and IP addresses. */
export interface SubjectNames {
  /** DNS names. */
  dns: string[];
  /** IP addresses. */
  ips: string[];
}

/** Splits host names into DNS names and IPs, dropping brackets, blanks and repeats. */
export function subjectNames(hosts: readonly string[]): SubjectNames {
  const dns = new Set<string>();
  const ips = new Set<string>();
  for (const raw of hosts) {
    const h = raw.trim().replace(/^\[|\]$/g, "");
    if (h === "" || h === "0.0.0.0" || h === "::") continue;
    (isIP(h) === 0 ? dns : ips).add(h);
  }
  return { dns: [...dns].sort(), ips: [...ips].sort() };
}

/** The cluster's TLS: the CA and what the control plane issues with it. */
export class ClusterTls {
  /** The CA. */
  readonly ca: CertificateAuthority;
  /** The CA's public-key hash, hex: what join tokens carry. */
  readonly caHash: string;
  /** Lifetime of issued certificates, ms. */
  readonly lifetimeMs: number;
  /** The names the control plane's certificate carries. */
  readonly controlNames: SubjectNames;
  readonly #clock: Clock;

  private constructor(
    ca: CertificateAuthority,
    caHash: string,
    lifetimeMs: number,
    names: SubjectNames,
    clock: Clock,
  ) {
    this.ca = ca;
    this.caHash = caHash;
    this.lifetimeMs = lifetimeMs;
    this.controlNames = names;
    this.#clock = clock;
  }

  /**
   * Wraps a CA; `controlHosts` are the names and addresses clients reach the
   * control plane by; `clock` dates and renews {@link controlCertificateSource}'s certificates.
   */
  static async of(
    ca: CertificateAuthority,
    controlHosts: readonly string[],
    lifetimeMs = CERTIFICATE_LIFETIME_MS,
    clock: Clock = systemClock,
  ): Promise<ClusterTls> {
    const names = subjectNames(["localhost", "127.0.0.1", "::1", ...controlHosts]);
    return new ClusterTls(ca, await publicKeyHash(ca.certPem), lifetimeMs, names, clock);
  }

  /**
   * The control plane's certificate as a server takes it (the API, the
   * embedded gateway): issued at the clock's time, renewed two thirds into
   * its life. Each call is a source of its own, with a key of its own.
   */
  controlCertificateSource(): CertificateSource {
    const now = () => this.#clock.now();
    return issuedCertificate("the cluster CA", () => this.controlCertificate(now()), now);
  }

  /** A new certificate and key for the control plane: serving, and as a client of agents. */
  controlCertificate(now: number): Promise<KeyPairPem> {
    return this.ca.issueWithKey({
      commonName: "llmgw-control",
      dnsNames: this.controlNames.dns,
      ipAddresses: this.controlNames.ips,
      use: "server+client",
      now,
      lifetimeMs: this.lifetimeMs,
    });
  }

  /**
   * Signs a node's CSR for the names it registered (its hostname, its
   * management address and the hosts of its listener URLs).
   *
   * @throws {CsrError} For a CSR that cannot be used.
   */
  async signNode(nodeId: string, csrPem: string, hosts: readonly string[], now: number) {
    const publicKey = await csrPublicKey(csrPem);
    const names = subjectNames(hosts);
    return await this.ca.issue({
      commonName: `node:${nodeId}`,
      publicKey,
      dnsNames: names.dns,
      ipAddresses: names.ips,
      use: "server+client",
      now,
      lifetimeMs: this.lifetimeMs,
    });
  }
}
