/**
 * Gateway API keys (design §12): stored hashed by the control plane, followed
 * by gateways, each with the served models it may use. With no key
 * configured the gateway is open (and loopback-only, see docs/gateway.md).
 *
 * @module
 */

import type { ApiKeySpec } from "../protocol/gateway_protocol.ts";

// The contract is protocol/'s; the gateway's modules name it from here.
export type { ApiKeySpec };

/** Who a request is, once its key checked out. */
export type Caller = { open: true } | {
  open: false;
  id: string;
  models: ReadonlySet<string> | null;
};

/** The keys a gateway accepts. */
export class ApiKeyTable {
  #byHash = new Map<string, { id: string; models: ReadonlySet<string> | null }>();

  /** Replaces the keys (from the control plane). */
  set(keys: readonly ApiKeySpec[]): void {
    this.#byHash = new Map(
      keys.map((k) => [k.hash, { id: k.id, models: k.models === null ? null : new Set(k.models) }]),
    );
  }

  /** True when keys are configured: every request then needs one. */
  get enabled(): boolean {
    return this.#byHash.size > 0;
  }

  /**
   * Checks an Authorization header. Returns the caller, or null when keys are
   * on and the header holds no valid key. The key is looked up by its hash,
   * so no comparison depends on the secret's bytes.
   */
  async check(authorization: string | null): Promise<Caller | null> {
    if (!this.enabled) return { open: true };
    const m = /^Bearer\s+(\S+)$/i.exec(authorization ?? "");
    if (m === null) return null;
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(m[1]));
    const hash = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
    const found = this.#byHash.get(hash);
    return found === undefined ? null : { open: false, id: found.id, models: found.models };
  }
}

/** Whether a caller may use a model. */
export function mayUse(caller: Caller, model: string): boolean {
  return caller.open || caller.models === null || caller.models.has(model);
}
