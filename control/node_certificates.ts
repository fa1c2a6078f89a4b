/**
 * The certificates the control plane signed for nodes, watched (design §11.2):
 * an agent renews two thirds into its certificate's life, so one still not
 * renewed five sixths in is failing to renew, with a sixth of the life (five
 * days of the default 30) left to fix it. That is said once per certificate
 * as a `certificate_not_renewed` event, and every node's expiry is a metric.
 * Kept in memory: after a restart a node is watched again from its next
 * renewal.
 *
 * @module
 */
import { notAfter, notBefore } from "../tls/authority.ts";
import type { ControlState } from "./state.ts";

/** The fraction of a certificate's life after which a missing renewal is reported. */
export const WARN_AFTER_FRACTION = 5 / 6;

interface Watched {
  notBefore: number;
  notAfter: number;
  warned: boolean;
}

/** Node certificates by node id, and the one warning each. */
export class NodeCertificates {
  readonly #state: ControlState;
  readonly #byNode = new Map<string, Watched>();

  /** Creates the watcher. */
  constructor(state: ControlState) {
    this.#state = state;
  }

  /** Remembers a certificate just signed for `nodeId`; it replaces the last one. */
  issued(nodeId: string, certPem: string): void {
    this.#byNode.set(nodeId, {
      notBefore: notBefore(certPem),
      notAfter: notAfter(certPem),
      warned: false,
    });
  }

  /** Forgets a removed node's certificate (it leaves the expiry metrics). */
  forget(nodeId: string): void {
    this.#byNode.delete(nodeId);
  }

  /** On each heartbeat: says once when `nodeId`'s certificate is overdue for renewal. */
  async check(nodeId: string): Promise<void> {
    const w = this.#byNode.get(nodeId);
    if (w === undefined || w.warned) return;
    const now = this.#state.now();
    if (now < w.notBefore + (w.notAfter - w.notBefore) * WARN_AFTER_FRACTION) return;
    w.warned = true;
    await this.#state.event(
      "certificate_not_renewed",
      `node/${nodeId}`,
      `the node's certificate expires ${new Date(w.notAfter).toISOString()} and has not been ` +
        `renewed; see the agent's log and llmgw_agent_certificate_renewal_failures_total`,
    );
  }

  /** Every watched node's certificate expiry (ms since epoch), by node id. */
  expiries(): [string, number][] {
    return [...this.#byNode].map(([node, w]): [string, number] => [node, w.notAfter]).sort();
  }
}
