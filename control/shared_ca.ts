/**
 * One cluster CA for every control plane on a shared store (issue #15).
 * Agents pin the CA's key hash when they join, so two instances serving
 * different CAs would cut nodes off at the first failover. The CA stays in
 * each control host's state directory (`tls/ca.{crt,key}`, copied there by
 * the operator: docs/ha.md); the database records only its public-key hash,
 * never the key. An instance whose CA differs, or that has none while the
 * database names one, refuses to start instead of creating its own.
 *
 * @module
 */
import { caPaths } from "./cluster_tls.ts";
import type { PostgresStore } from "./store/postgres_store.ts";
import { TlsMaterialError } from "../tls/authority.ts";

/** The CA key hash the shared store records, or null before the first control plane starts. */
export async function recordedCaHash(store: PostgresStore): Promise<string | null> {
  const rows = await store.query(
    "read the cluster CA hash",
    "SELECT value FROM llmgw_cluster WHERE key = 'ca_key_hash'",
  );
  return rows.length === 0 ? null : String(rows[0].value);
}

/**
 * Refuses to create a new CA in `stateDir` when the shared store already
 * names one: the operator must copy the cluster's CA there first.
 *
 * @throws {TlsMaterialError} Naming the files to copy.
 */
export function assertCaPresentFor(stateDir: string, recorded: string | null): void {
  if (recorded === null) return;
  const paths = caPaths(stateDir);
  const present = [paths.cert, paths.key].filter((p) => {
    try {
      Deno.statSync(p);
      return true;
    } catch {
      return false;
    }
  });
  if (present.length === 0) {
    throw new TlsMaterialError(
      `Cannot start on the shared store: it belongs to the cluster CA sha256:${recorded}, and ` +
        `${paths.cert} and ${paths.key} are missing; copy them from a control host that has ` +
        `them (a new CA would cut off every joined node)`,
    );
  }
}

/**
 * Records `caHash` as the cluster's when the store names none yet, else
 * checks it is the same one.
 *
 * @throws {TlsMaterialError} When the store names another CA.
 */
export async function agreeOnCa(
  store: PostgresStore,
  caHash: string,
  stateDir: string,
): Promise<void> {
  await store.query(
    "record the cluster CA hash",
    "INSERT INTO llmgw_cluster (key, value) VALUES ('ca_key_hash', $1) ON CONFLICT (key) DO NOTHING",
    [caHash],
  );
  const recorded = await recordedCaHash(store);
  if (recorded !== caHash) {
    throw new TlsMaterialError(
      `Cannot start on the shared store: its cluster CA is sha256:${recorded}, but ` +
        `${caPaths(stateDir).cert} is sha256:${caHash}; copy the cluster's tls/ca.crt and ` +
        `tls/ca.key from a control host that has them`,
    );
  }
}
