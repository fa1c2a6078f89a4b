/**
 * What an agent sets up on its host before it serves anything (design §10):
 * its state directory, its TLS material (agent/agent_tls.ts; none, with a
 * warning, for an http:// control plane), its management address
 * (agent/mgmt_addr.ts) and its local API token (agent/credentials.ts).
 *
 * @module
 */
import { dirname } from "node:path";
import type { Logger } from "../log/log.ts";
import { createOwnerOnlyDir, narrowToOwner, octalMode } from "../http/secret_file.ts";
import { errorMessage } from "../text/error_message.ts";
import { AgentError, type AgentOptions } from "./agent_options.ts";
import { AgentTls, agentTlsPaths } from "./agent_tls.ts";
import {
  loadOrCreateLocalToken,
  localTokenPath,
  nodeTokenPath,
  proxyTokenPath,
} from "./credentials.ts";
import { detectMgmt } from "./mgmt_addr.ts";

/** The host-side facts an agent starts from. */
export interface AgentSetup {
  /** TLS toward the control plane and on both listeners; null for an http:// control plane. */
  tls: AgentTls | null;
  /** The management address and its interface (null when not known). */
  mgmt: { addr: string; iface: string | null };
  /** The local API's token. */
  localToken: string;
}

/**
 * Creates the state directory (0700; an existing wider one is warned about,
 * never changed), prepares TLS, tells the management address
 * and loads (or creates) the local token. On a failure nothing is left
 * open: TLS material already prepared is released.
 *
 * @throws {AgentError} When the state directory, the TLS material or the
 * management address cannot be used.
 */
export async function setUpAgent(o: AgentOptions, log: Logger): Promise<AgentSetup> {
  try {
    createOwnerOnlyDir(o.stateDir);
  } catch (e) {
    throw new AgentError(`cannot create state directory ${o.stateDir}: ${errorMessage(e)}`);
  }
  warnWideStateDir(o.stateDir, log);
  narrowOwnEntries(o.stateDir, log);
  let tls: AgentTls | null;
  try {
    tls = await AgentTls.prepare({
      stateDir: o.stateDir,
      controlUrl: o.controlUrl,
      controlUrls: o.controlUrls,
      joinToken: o.joinToken,
      caFile: o.caFile,
      log: (message, fields) => log.info(message, fields),
      clock: o.clock,
    });
  } catch (e) {
    throw new AgentError(errorMessage(e));
  }
  if (tls === null) {
    log.warn(
      "plain HTTP: the control plane URL is http://, so the join token and node credential " +
        "cross the network in clear and the agent's listeners serve plain HTTP (lab use only)",
      { control_url: o.controlUrl },
    );
  }
  try {
    const mgmt = detectMgmt({ addr: o.mgmtAddr, iface: o.mgmtInterface });
    if ("error" in mgmt) throw new AgentError(mgmt.error);
    if (o.localToken !== undefined) return { tls, mgmt, localToken: o.localToken };
    const localToken = loadOrCreateLocalToken(o.stateDir);
    log.info("local API token generated or reused", { path: localTokenPath(o.stateDir) });
    return { tls, mgmt, localToken };
  } catch (e) {
    tls?.close();
    throw e;
  }
}

/**
 * Warns when an existing state directory has group or other bits, and
 * leaves it so: the agent runs as root and may have been given a shared
 * directory (`/var/lib/llmgw`, the parent of the control plane's and the
 * gateway's state on a host running both; a home directory), whose other
 * users would lose their way in. Every secret the agent keeps in it is
 * owner-only by itself (docs/security.md).
 */
function warnWideStateDir(stateDir: string, log: Logger): void {
  let mode: number;
  try {
    mode = (Deno.statSync(stateDir).mode ?? 0o700) & 0o777;
  } catch {
    return; // Created a moment ago; what uses it next says what is wrong.
  }
  if ((mode & 0o077) === 0) return;
  log.warn(
    "state directory is not owner-only; the agent leaves its mode alone (it may be shared) and keeps " +
      "its own files in it owner-only; unless other services use it, make it 0700",
    { path: stateDir, mode: octalMode(mode), fix: `chmod 700 ${stateDir}` },
  );
}

/**
 * The secrets the agent itself keeps in its state directory, owner-only
 * again where they are not (a state directory copied without its modes,
 * say): its tokens and its TLS directory. The shards' directory is the
 * supervisor's (supervisor/shard_dir.ts).
 */
function narrowOwnEntries(stateDir: string, log: Logger): void {
  const own = [
    dirname(agentTlsPaths(stateDir).key),
    nodeTokenPath(stateDir),
    localTokenPath(stateDir),
    proxyTokenPath(stateDir),
  ];
  for (const path of own) {
    const n = narrowToOwner(path);
    if (n === null) continue;
    const fields = { path, was: octalMode(n.was) };
    if (n.error === null) log.warn("narrowed to owner-only: it holds a secret", fields);
    else log.warn("cannot narrow to owner-only; make it so", { ...fields, error: n.error });
  }
}
