/**
 * What an agent sets up on its host before it serves anything (design §10):
 * its state directory, its TLS material (agent/agent_tls.ts; none, with a
 * warning, for an http:// control plane), its management address
 * (agent/mgmt_addr.ts) and its local API token (agent/credentials.ts).
 *
 * @module
 */
import type { Logger } from "../log/log.ts";
import { ownerOnlyDir } from "../http/secret_file.ts";
import { errorMessage } from "../text/error_message.ts";
import { AgentError, type AgentOptions } from "./agent_options.ts";
import { AgentTls } from "./agent_tls.ts";
import { loadOrCreateLocalToken, localTokenPath } from "./credentials.ts";
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
 * Creates the state directory (or narrows it to 0700), prepares TLS, tells the management address
 * and loads (or creates) the local token. On a failure nothing is left
 * open: TLS material already prepared is released.
 *
 * @throws {AgentError} When the state directory, the TLS material or the
 * management address cannot be used.
 */
export async function setUpAgent(o: AgentOptions, log: Logger): Promise<AgentSetup> {
  try {
    Deno.mkdirSync(o.stateDir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new AgentError(`cannot create state directory ${o.stateDir}: ${errorMessage(e)}`);
  }
  narrowStateDir(o.stateDir, log);
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
 * Makes an existing state directory owner-only (0700), as a new one is
 * created: it holds the node's key, the tokens, and the engines' keys and
 * logs. Narrowed with a warning naming the mode it had; one the agent may
 * not narrow (not its owner) is warned about and used, since every secret
 * in it is an owner-only file or directory of its own (docs/security.md).
 */
function narrowStateDir(stateDir: string, log: Logger): void {
  try {
    const was = ownerOnlyDir(stateDir);
    if (was === null) return;
    log.warn(
      "state directory narrowed to owner-only (0700): it holds keys, tokens and engine logs",
      {
        path: stateDir,
        was: `0${was.toString(8)}`,
      },
    );
  } catch (e) {
    log.warn(
      "state directory left as it is: it cannot be narrowed to owner-only (0700); make it so",
      { path: stateDir, error: errorMessage(e) },
    );
  }
}
