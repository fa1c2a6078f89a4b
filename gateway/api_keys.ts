/**
 * Gateway API keys (design §12): stored hashed by the control plane, followed
 * by gateways, each with the served models it may use. With no key
 * configured the gateway is open (and loopback-only, see docs/gateway.md).
 *
 * @module
 */

import type { ApiKeySpec } from "../protocol/gateway_protocol.ts";
import { bearer, tokenDigest } from "../http/tokens.ts";

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
  check(authorization: string | null): Promise<Caller | null> {
    return Promise.resolve(this.#caller(authorization));
  }

  #caller(authorization: string | null): Caller | null {
    if (!this.enabled) return { open: true };
    const key = bearer(authorization);
    if (key === null) return null;
    // node:crypto's synchronous hash (http/tokens.ts): WebCrypto's async digest
    // was 9% of a heartbeat profile, and every gateway request hashes its key.
    const found = this.#byHash.get(tokenDigest(key));
    return found === undefined ? null : { open: false, id: found.id, models: found.models };
  }
}

/** Whether a caller may use a model. */
export function mayUse(caller: Caller, model: string): boolean {
  return caller.open || caller.models === null || caller.models.has(model);
}
