/**
 * The record builders the store tests share: small but complete records of
 * each type, so a store that drops or mangles a nested field fails the round
 * trip (tests/store_contract.ts, control/store/*_test.ts).
 *
 * @module
 */
import type { ModelPull } from "../control/model_pull_record.ts";
import type {
  AccessTokenKind,
  AccessTokenRecord,
  ApiKeyRecord,
  EventRecord,
  StoredDeployment,
  StoredNode,
  StoredPlacement,
  StoredReplica,
} from "../control/store/store.ts";
import type { Deployment } from "../deployment/schema.ts";
import type { Explanation } from "../placement/types.ts";
import type { RegisterRequest } from "../protocol/agent_protocol.ts";

/** A deployment with one profile, defaults applied. */
export function deploymentSpec(name: string): Deployment {
  return {
    name,
    model: "meta-llama/Llama-3.1-8B-Instruct",
    served_model_name: name,
    replicas: 2,
    placement: "pack",
    profiles: [{
      name: "h100",
      engine: "vllm",
      gpu_class: "h100-80g",
      tensor_parallel: 1,
      pipeline_parallel: 1,
      nodes: 1,
      gpus_per_node: 1,
      quantization: "none",
      engine_args: ["--max-model-len", "8192"],
      env: { VLLM_LOGGING_LEVEL: "INFO" },
      engine_options: { multi_node_backend: "ray", enforce_eager: true, swap_space: 4 },
      node_selector: { "llmgw.io/pool": "serving" },
    }],
  };
}

/** A stored deployment. */
export function storedDeployment(name: string, at = 1_700_000_000_000): StoredDeployment {
  return {
    name,
    spec: deploymentSpec(name),
    created_at: at,
    updated_at: at,
    revision: 1,
    history: [],
    rollout: null,
    uid: `uid-${name}`,
    model_commit: null,
  };
}

/** An explanation with one profile that fit and per-node detail. */
export function explanation(): Explanation {
  return {
    summary: "placed with profile h100 on node-1",
    profiles: [{
      profile: "h100",
      fits: true,
      summary: "1/2 nodes fit: 1 cordoned",
      counts: { node_cordoned: 1 },
      nodes: [{ node: "node-2", reason: "node_cordoned", message: "node-2 is cordoned" }],
    }],
  };
}

/** A single-node placement of `replicaId` on `node`. */
export function placed(
  replicaId: string,
  deployment: string,
  node = "node-1",
): StoredPlacement {
  return {
    ports: { http: { [`${replicaId}/0`]: 8000 }, rendezvous: 29500 },
    status: "placed",
    replica_id: replicaId,
    deployment,
    profile: "h100",
    engine: "vllm",
    shards: [{
      rank: 0,
      shard_id: `${replicaId}/0`,
      node,
      gpu_indices: [0],
      gpu_class: "h100-80g",
      fabric: null,
      hcas: [],
      hca_ports: [],
    }],
    explanation: explanation(),
  };
}

/** A replica: placed when `isPlaced`, else pending with no explanation yet. */
export function storedReplica(
  id: string,
  deployment = "llama",
  isPlaced = true,
  at = 1_700_000_000_000,
): StoredReplica {
  return {
    id,
    deployment,
    index: Number(/(\d+)$/.exec(id)?.[1] ?? 0),
    phase: isPlaced ? "placed" : "pending",
    placement: isPlaced ? placed(id, deployment) : null,
    explanation: isPlaced ? explanation() : null,
    failure: null,
    revision: 1,
    uid: `uid-${id}`,
    created_at: at,
    updated_at: at,
  };
}

/** An agent registration with no GPUs and no fabrics. */
export function registration(nodeId: string): RegisterRequest {
  return {
    protocol: 1,
    node_id: nodeId,
    hostname: `${nodeId}.example.internal`,
    mgmt_addr: "10.0.0.7",
    mgmt_interface: "eth0",
    agent_url: null,
    labels: { "llmgw.io/pool": "serving" },
    gpus: [],
    fabrics: [],
    agent_version: "0.1.0",
    engine_versions: { vllm: "0.8.5" },
  };
}

/** A stored node. */
export function storedNode(id: string, at = 1_700_000_000_000): StoredNode {
  return {
    id,
    registration: registration(id),
    token_hash: "ab".repeat(32),
    intent: "none",
    label_overrides: { zone: "a" },
    fabric_overrides: { "ib-old": "ib-a", "roce-x": null },
    generation: 3,
    updated_at: at,
    last_seen_at: at - 5_000,
  };
}

/** An API key limited to `models` (null: every model). */
export function apiKey(id: string, models: string[] | null = ["llama"]): ApiKeyRecord {
  return { id, name: `key ${id}`, hash: "cd".repeat(32), models, created_at: 1_700_000_000_000 };
}

/** An access token of `kind` that never expires unless `expires_at` is given. */
export function accessToken(
  id: string,
  kind: AccessTokenKind = "gateway",
  expires_at: number | null = null,
): AccessTokenRecord {
  return {
    id,
    kind,
    hash: "ef".repeat(32),
    description: `token ${id}`,
    created_at: 1_700_000_000_000,
    expires_at,
  };
}

/** A pull of `id` (as `repo@commit` or any key) onto two nodes, one of them done. */
export function modelPull(id: string): ModelPull {
  return {
    id,
    model: "meta-llama/Llama-3.1-8B-Instruct",
    commit: "0123456789abcdef0123456789abcdef01234567",
    nodes: [
      {
        node: "n1",
        state: "done",
        requested_at: 1_700_000_000_000,
        finished_at: 1_700_000_060_000,
        reason: null,
      },
      {
        node: "n2",
        state: "requested",
        requested_at: 1_700_000_000_000,
        finished_at: null,
        reason: null,
      },
    ],
    created_at: 1_700_000_000_000,
    updated_at: 1_700_000_060_000,
    finished_at: null,
  };
}

/** An event about `subject`, without its id. */
export function event(
  subject: string,
  at = 1_700_000_000_000,
  uid = `uid-${subject}`,
): Omit<EventRecord, "id"> {
  return { at, kind: "replica_placed", subject, message: `${subject} placed on node-1`, uid };
}
