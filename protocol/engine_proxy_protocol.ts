/**
 * The gateway ↔ agent engine proxy contract (design §12): the gateway names
 * the shard in `x-llmgw-shard`; a refusal the proxy makes itself, before
 * anything reached an engine, carries {@link PROXY_REFUSED_HEADER}, so the
 * gateway can tell it from an engine's own answer with the same status.
 *
 * @module
 */

/** The header naming the shard a request is for. */
export const SHARD_HEADER = "x-llmgw-shard";

/** Set, with the refusal's code, on answers the proxy gives without reaching an engine. */
export const PROXY_REFUSED_HEADER = "x-llmgw-proxy-refused";

/**
 * Refusals after which the request may go to another replica: no engine of
 * that shard runs on the node (stopped, or never placed there), or its
 * engine refused the connection (stopping), so nothing was generated.
 */
export const RETRYABLE_REFUSALS: readonly string[] = ["unknown_shard", "engine_refused"];
