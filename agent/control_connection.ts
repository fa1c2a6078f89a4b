/**
 * How the agent reaches the control plane (design §10): one client over
 * every control plane URL, moving to the next on a connection failure or a
 * "not the leader" answer (http/failover_fetch.ts), and over TLS trusting
 * the pinned CA only (agent/agent_tls.ts).
 *
 * @module
 */
import { FailoverFetch } from "../http/failover_fetch.ts";
import { AgentError, type AgentOptions } from "./agent_options.ts";
import { ControlClient } from "./control_client.ts";
import type { Logger } from "../log/log.ts";
import { errorMessage } from "../text/error_message.ts";

/**
 * The agent's control-plane client. `tlsFetch` is read at every call: TLS
 * is set up after the client exists, and its trust can change while it runs.
 *
 * @throws {AgentError} When a control plane URL cannot be used.
 */
export function controlClient(
  options: Pick<AgentOptions, "controlUrl" | "controlUrls" | "joinToken" | "requestTimeoutMs">,
  tlsFetch: () => typeof fetch | undefined,
  log: Logger,
): ControlClient {
  try {
    const control = new FailoverFetch(
      options.controlUrls ?? [options.controlUrl],
      (input, init) => (tlsFetch() ?? fetch)(input, init),
      (line) => log.warn(line),
    );
    return new ControlClient({
      url: options.controlUrl,
      joinToken: options.joinToken,
      timeoutMs: options.requestTimeoutMs,
      fetch: control.fetch,
    });
  } catch (e) {
    throw new AgentError(
      `control plane URL ${options.controlUrl}: ${errorMessage(e)}`,
    );
  }
}
