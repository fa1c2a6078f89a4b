/**
 * The gateway ↔ control plane protocol (design §11, §12): what a gateway
 * polls, with a gateway token (design §11.2), to keep its routing table and
 * API keys.
 *
 * - `GET /v1/endpoints` → {@link EndpointListAnswer}: rank-0 endpoints of
 *   ready replicas, the API keys' hashes with the models each may use, and
 *   every deployment's served name, so that a deployment with no ready
 *   replica answers 503 rather than 404.
 *
 * A gateway refuses an answer that does not match as a whole and keeps its
 * last known set: dropping one malformed key could leave no key at all, and
 * a gateway with no key is open.
 *
 * @module
 */
import { z } from "zod";
import { LoadMetricNamesSchema } from "./agent_protocol.ts";
import { ROUTING_POLICIES, type RoutingPolicy } from "../deployment/schema.ts";
import type { ApiKeySpec } from "../gateway/api_keys.ts";
import type { EndpointSpec } from "../gateway/endpoints.ts";
import type { Assert, Same } from "./same_type.ts";
import { parseWire } from "./wire_error.ts";

/** The most endpoints one answer lists. */
export const MAX_ENDPOINTS = 100_000;

/** The most API keys one answer lists. */
export const MAX_API_KEYS = 100_000;

/** The most served models one API key names. */
export const MAX_KEY_MODELS = 1000;

const ServedModelName = z.string().min(1).max(256);

/** One ready endpoint (gateway/endpoints.ts `EndpointSpec`). */
export const EndpointSpecSchema = z.object({
  model: ServedModelName,
  replica_id: z.string().min(1).max(256),
  url: z.string().max(300).regex(
    /^https?:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?\/?$/,
    "must be an engine's origin such as http://10.0.0.1:8000",
  ),
  /** The shard the agent's engine proxy at `url` forwards to; absent for a direct engine. */
  shard: z.string().min(1).max(256).optional(),
  /** The proxy's credential, sent as `Authorization: Bearer …`; absent for a direct engine. */
  token: z.string().min(16).max(256).optional(),
  /** The engine's load metric names, for reading its `/metrics`; absent when unknown. */
  load_metrics: LoadMetricNamesSchema.optional(),
});

/** One API key as gateways see it (gateway/api_keys.ts `ApiKeySpec`). */
export const ApiKeySpecSchema = z.object({
  id: z.string().min(1).max(128),
  hash: z.string().regex(/^[0-9a-f]{64}$/, "must be a SHA-256 digest in lower-case hex"),
  models: z.array(ServedModelName).max(MAX_KEY_MODELS).nullable(),
});

/** The answer to `GET /v1/endpoints`. Unknown fields are ignored. */
export const EndpointListAnswerSchema = z.object({
  endpoints: z.array(EndpointSpecSchema).max(MAX_ENDPOINTS),
  api_keys: z.array(ApiKeySpecSchema).max(MAX_API_KEYS),
  models: z.array(ServedModelName).max(MAX_ENDPOINTS),
  /** Each served model's routing policy; a model not named (or an older control plane) gets the default. */
  routing: z.record(ServedModelName, z.enum(ROUTING_POLICIES)).default({}),
});

/** The answer to `GET /v1/endpoints`: what the control plane sends and gateways parse. */
export interface EndpointListAnswer {
  /** Rank-0 endpoints of ready replicas. */
  endpoints: EndpointSpec[];
  /** Every API key: its hash and the served models it may use. */
  api_keys: ApiKeySpec[];
  /** Every deployment's served model name, ready or not. */
  models: string[];
  /** Each served model's routing policy (absent: the default). */
  routing: Record<string, RoutingPolicy>;
}

// `deno check` fails here when the gateway's types and the schema drift apart.
type _EndpointListMatchesSchema = Assert<
  Same<z.output<typeof EndpointListAnswerSchema>, EndpointListAnswer>
>;

/**
 * Parses the answer to `GET /v1/endpoints`.
 *
 * @throws {WireFormatError} Naming each wrong field's path, e.g. `endpoints[2].url`.
 */
export function parseEndpointListAnswer(value: unknown): EndpointListAnswer {
  return parseWire(EndpointListAnswerSchema, value, "the endpoint list");
}
