/**
 * Deterministic synthetic clusters for placement benchmarks: N nodes × 8
 * GPUs of mixed classes, 4 fabrics, partly allocated, a few unhealthy GPUs
 * and some cordoned nodes.
 *
 * @module
 */
import type { Gpu } from "../discovery/types.ts";
import type { ClusterNode } from "../inventory/types.ts";
import type { Deployment } from "../deployment/schema.ts";
import { AGENT_PROTOCOL_VERSION, type RegisterRequest } from "../protocol/agent_protocol.ts";

/** A small, seedable PRNG (mulberry32), so every run measures the same cluster. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CLASSES = [
  { cls: "h100-80g", name: "NVIDIA H100 80GB HBM3", mib: 81559, cc: "9.0" },
  { cls: "a100-80g", name: "NVIDIA A100-SXM4-80GB", mib: 81920, cc: "8.0" },
  { cls: "h200-140g", name: "NVIDIA H200", mib: 143771, cc: "9.0" },
  { cls: "l40s-45g", name: "NVIDIA L40S", mib: 46068, cc: "8.9" },
];
const FABRICS = ["ib-a", "ib-b", "ib-c", "roce-d"];

/** Builds the cluster. */
export function syntheticCluster(nodes: number, seed = 1): ClusterNode[] {
  const random = rng(seed);
  const out: ClusterNode[] = [];
  for (let i = 0; i < nodes; i++) {
    const kind = CLASSES[Math.floor(random() * CLASSES.length)];
    const nvlink = kind.cls !== "l40s-45g";
    const gpus: Gpu[] = Array.from({ length: 8 }, (_, g) => ({
      index: g,
      uuid: `GPU-${i}-${g}`,
      name: kind.name,
      class: kind.cls,
      memory_total_mb: kind.mib,
      memory_used_mb: 0,
      compute_capability: kind.cc,
      numa_node: g < 4 ? 0 : 1,
      pci_bus_id: null,
      driver_version: "570.86.15",
      cuda_version: "12.8",
      nvlink_peers: nvlink ? [0, 1, 2, 3, 4, 5, 6, 7].filter((p) => p !== g) : [],
      health: {
        ecc_errors: 0,
        temperature_c: 35,
        problems: random() < 0.01 ? ["uncorrected ECC errors: 1"] : [],
      },
    }));
    const used = Math.floor(random() * 3) * 2; // 0, 2 or 4 GPUs already allocated
    const fabric = FABRICS[Math.floor(random() * FABRICS.length)];
    out.push({
      id: `node-${i}`,
      hostname: `node-${i}`,
      mgmt_addr: `192.0.2.${i % 250}`,
      mgmt_interface: "eth0",
      state: random() < 0.03 ? "cordoned" : "ready",
      labels: { zone: random() < 0.5 ? "a" : "b" },
      gpus,
      fabrics: kind.cls === "l40s-45g" ? [] : [{
        fabric,
        hcas: ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"],
        ports: [0, 1, 2, 3].map((h) => ({
          hca: `mlx5_${h}`,
          port: 1,
          link_layer: fabric.startsWith("roce") ? "roce" : "infiniband",
          rate_gbps: 400,
          roce_v2_gid_index: fabric.startsWith("roce") ? 3 : null,
        })),
        rate_gbps: 400,
      }],
      allocations: used === 0 ? [] : [{
        replica_id: `other-${i}`,
        shard_id: `other-${i}/0`,
        deployment: "other",
        gpu_indices: Array.from({ length: used }, (_, g) => g),
      }],
    });
  }
  return out;
}

/** A single-node deployment whose first profile never fits (its selector matches no node), so both are evaluated. */
export const singleNode: Deployment = {
  name: "llama-70b",
  model: "meta-llama/Llama-3.1-70B-Instruct",
  served_model_name: "llama-70b",
  replicas: 1,
  placement: "pack",
  profiles: [
    { ...profile("h200-tp8", "h200-140g", 8, 1, 8, "fp8"), node_selector: { zone: "c" } },
    profile("h100-tp4", "h100-80g", 4, 1, 4, "fp8"),
  ],
};

/** A multi-node deployment: 2 nodes × 8 A100s on one fabric. */
export const multiNode: Deployment = {
  name: "llama-405b",
  model: "meta-llama/Llama-3.1-405B-Instruct",
  served_model_name: "llama-405b",
  replicas: 1,
  placement: "pack",
  profiles: [profile("a100-2x8", "a100-80g", 16, 1, 8, "none", 2)],
};

function profile(
  name: string,
  gpuClass: string,
  tp: number,
  pp: number,
  gpn: number,
  quantization: string,
  nodes = 1,
) {
  return {
    name,
    engine: "vllm",
    gpu_class: gpuClass,
    tensor_parallel: tp,
    pipeline_parallel: pp,
    nodes,
    gpus_per_node: gpn,
    quantization,
    engine_args: [],
    engine_options: {},
    env: {},
    node_selector: {},
  };
}

/** The registration an agent on synthetic node `n` would send. */
export function registrationOf(n: ClusterNode): RegisterRequest {
  return {
    protocol: AGENT_PROTOCOL_VERSION,
    node_id: n.id,
    hostname: n.hostname,
    mgmt_addr: n.mgmt_addr,
    mgmt_interface: "eth0",
    agent_url: null,
    labels: n.labels,
    gpus: n.gpus,
    fabrics: n.fabrics,
    agent_version: "0.1.0",
    engine_versions: {},
  };
}
