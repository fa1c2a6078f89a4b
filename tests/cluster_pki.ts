/**
 * A cluster CA with the certificates tests of the peer route need: node
 * certificates (CN `node:<id>`, server and client, for 127.0.0.1), the
 * control plane's, and a node certificate from another CA.
 *
 * @module
 */
import { CertificateAuthority, type KeyPairPem } from "../tls/authority.ts";

const DAY = 86_400_000;

/** The CA and certificates of a test cluster. */
export interface ClusterPki {
  /** The cluster CA, PEM. */
  caPem: string;
  /** Node `a`'s certificate (the serving agent in most tests). */
  server: KeyPairPem;
  /** Node `b`'s certificate (the asking agent). */
  nodeB: KeyPairPem;
  /** The control plane's certificate (CN `llmgw-control`). */
  control: KeyPairPem;
  /** A `node:b` certificate signed by another CA. */
  stranger: KeyPairPem;
}

/** A fresh cluster CA and its certificates, valid for a day. */
export async function clusterPki(): Promise<ClusterPki> {
  const now = Date.now();
  const { ca } = await CertificateAuthority.create({ now, lifetimeMs: DAY });
  const { ca: other } = await CertificateAuthority.create({ now, lifetimeMs: DAY });
  const node = (cn: string, by = ca) =>
    by.issueWithKey({
      commonName: cn,
      ipAddresses: ["127.0.0.1"],
      use: "server+client",
      now,
      lifetimeMs: DAY,
    });
  return {
    caPem: ca.certPem,
    server: await node("node:a"),
    nodeB: await node("node:b"),
    control: await node("llmgw-control"),
    stranger: await node("node:b", other),
  };
}
