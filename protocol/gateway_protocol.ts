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
import { type LoadMetricNames, LoadMetricNamesSchema } from "./agent_protocol.ts";
import { ROUTING_POLICIES, type RoutingPolicy } from "../deployment/schema.ts";
import type { Assert, Same } from "./same_type.ts";
import { parseWire } from "./wire_error.ts";

/** The most endpoints one answer lists. */
export const MAX_ENDPOINTS = 100_000;

/** The most API keys one answer lists. */
export const MAX_API_KEYS = 100_000;

/** The most served models one API key names. */
export const MAX_KEY_MODELS = 1000;

const ServedModelName = z.string().min(1).max(256);

/**
 * One ready endpoint as the control plane reports it: rank 0 of a ready
 * replica (control/views.ts builds them, gateway/endpoints.ts routes to them).
 */
export interface EndpointSpec {
  /** Served model name (the `model` clients send). */
  model: string;
  /** Replica id. */
  replica_id: string;
  /** Base URL of the replica's rank-0 engine or of its agent's engine proxy, `http://addr:port`. */
  url: string;
  /** The shard the agent's engine proxy forwards to (`x-llmgw-shard`); absent: a direct engine. */
  shard?: string;
  /** The engine proxy's credential; absent: a direct engine. */
  token?: string;
  /** The engine's load metric names (from its plugin); absent: its load is not read. */
  load_metrics?: LoadMetricNames;
}

/** A key as gateways receive it: its SHA-256 (hex) and allowed models (null: all). */
export interface ApiKeySpec {
  /** Key id, for logs. */
  id: string;
  /** SHA-256 of the key, hex. */
  hash: string;
  /** Served model names it may use; null for all. */
  models: string[] | null;
}

/** One ready endpoint ({@link EndpointSpec}). */
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

/** One API key as gateways see it ({@link ApiKeySpec}). */
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
