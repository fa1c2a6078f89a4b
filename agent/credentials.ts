/**
 * The agent's credentials on disk (design §10): the node token the control
 * plane issued, so that a restarted agent keeps its identity instead of
 * registering again, and the local API token when the operator set none.
 * Both files are written mode 0600, atomically (temporary file, rename).
 *
 * `<stateDir>/node_token` holds JSON: the token and what it belongs to
 * (control plane URL, node id), so that an agent pointed at another control
 * plane or given another node id does not present a stale credential.
 *
 * @module
 */
import { loadOrCreateSecret, writeSecretFile } from "../http/secret_file.ts";
import { join } from "node:path";
import { z } from "zod";

/** A registration remembered across agent restarts. */
export interface StoredSession {
  /** The control plane it was issued by (its URL as configured). */
  control_url: string;
  /** The node id it was issued for (as configured). */
  node_id: string;
  /** The node id the control plane registered (normally the same). */
  registered_id: string;
  /** The node token. */
  node_token: string;
  /** The heartbeat interval the control plane asked for. */
  heartbeat_interval_ms: number;
  /** A digest of what was registered (reports.ts `registrationFingerprint`); empty when unknown. */
  fingerprint: string;
}

const StoredSessionSchema = z.object({
  version: z.literal(1),
  control_url: z.string(),
  node_id: z.string(),
  registered_id: z.string().min(1),
  node_token: z.string().min(1),
  heartbeat_interval_ms: z.number().positive(),
  fingerprint: z.string().default(""),
});

/** Path of the node token file. */
export function nodeTokenPath(stateDir: string): string {
  return join(stateDir, "node_token");
}

/** Path of the generated local API token file. */
export function localTokenPath(stateDir: string): string {
  return join(stateDir, "local_token");
}

/**
 * The stored session if it matches this control plane and node id; null
 * when there is none, it is unreadable, or it belongs to another identity.
 */
export function readSession(
  stateDir: string,
  controlUrl: string | readonly string[],
  nodeId: string,
): StoredSession | null {
  // Any of the control planes' URLs: a list reordered, or grown, keeps the node's credential.
  const urls: readonly string[] = typeof controlUrl === "string" ? [controlUrl] : controlUrl;
  let raw: unknown;
  try {
    raw = JSON.parse(Deno.readTextFileSync(nodeTokenPath(stateDir)));
  } catch {
    return null;
  }
  const parsed = StoredSessionSchema.safeParse(raw);
  if (!parsed.success) return null;
  const s = parsed.data;
  if (!urls.includes(s.control_url) || s.node_id !== nodeId) return null;
  return {
    control_url: s.control_url,
    node_id: s.node_id,
    registered_id: s.registered_id,
    node_token: s.node_token,
    heartbeat_interval_ms: s.heartbeat_interval_ms,
    fingerprint: s.fingerprint,
  };
}

/** Stores the session (0600). */
export function writeSession(stateDir: string, session: StoredSession): void {
  writeSecretFile(
    nodeTokenPath(stateDir),
    JSON.stringify({ version: 1, ...session }, null, 2) + "\n",
  );
}

/** Forgets the stored session (the control plane refused it). */
export function removeSession(stateDir: string): void {
  try {
    Deno.removeSync(nodeTokenPath(stateDir));
  } catch {
    // Already gone.
  }
}

/**
 * The local API token stored in `<stateDir>/local_token`, created (32
 * random bytes, base64url) on first use.
 */
export function loadOrCreateLocalToken(stateDir: string): string {
  return loadOrCreateSecret(localTokenPath(stateDir));
}

/** Where the engine proxy's credential lives. */
export function proxyTokenPath(stateDir: string): string {
  return join(stateDir, "proxy_token");
}

/** The engine proxy's credential: read, or generated once into `<stateDir>/proxy_token` (0600). */
export function loadOrCreateProxyToken(stateDir: string): string {
  return loadOrCreateSecret(proxyTokenPath(stateDir));
}
