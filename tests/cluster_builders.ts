/**
 * Small builders of cluster snapshots and deployments for placement tests
 * (placement/*_test.ts, tests/placement_property_test.ts). Test support only.
 *
 * @module
 */
import type { FabricAttachment, Gpu } from "../discovery/types.ts";
import type { Deployment, Profile } from "../deployment/schema.ts";
import type { Allocation, ClusterNode, NodeState } from "../inventory/types.ts";

/** The compute capability of each class the tests use. */
export const CLASS_CC: Readonly<Record<string, string>> = {
  "h100-80g": "9.0",
  "a100-80g": "8.0",
  "l40s-45g": "8.9",
};

/** Options of {@link gpu}. */
export interface GpuOptions {
  /** GPU class; default h100-80g. `null`: unknown class. */
  cls?: string | null;
  /** Compute capability; default the class's. `null`: unknown. */
  cc?: string | null;
  /** NVLink peers. */
  peers?: number[];
  /** Health problems (any makes the GPU unhealthy). */
  problems?: string[];
}

/** One GPU. */
export function gpu(index: number, o: GpuOptions = {}): Gpu {
  const cls = o.cls === undefined ? "h100-80g" : o.cls;
  const cc = o.cc !== undefined ? o.cc : cls === null ? null : CLASS_CC[cls] ?? null;
  return {
    index,
    uuid: `GPU-${index}`,
    name: cls,
    class: cls,
    memory_total_mb: null,
    memory_used_mb: null,
    compute_capability: cc,
    numa_node: null,
    pci_bus_id: null,
    driver_version: null,
    cuda_version: null,
    nvlink_peers: [...(o.peers ?? [])].sort((a, b) => a - b),
    health: { ecc_errors: null, temperature_c: null, problems: [...(o.problems ?? [])] },
  };
}

/** `count` GPUs with indices `first`.. of one class, no NVLink, all healthy. */
export function gpus(count: number, o: GpuOptions & { first?: number } = {}): Gpu[] {
  const first = o.first ?? 0;
  return Array.from({ length: count }, (_, i) => gpu(first + i, o));
}

/** Sets NVLink peers so that each group of indices is an all-to-all domain. */
export function withDomains(list: Gpu[], groups: number[][]): Gpu[] {
  for (const group of groups) {
    for (const i of group) {
      const g = list.find((x) => x.index === i);
      if (g === undefined) throw new RangeError(`no GPU ${i}`);
      g.nvlink_peers = group.filter((p) => p !== i).sort((a, b) => a - b);
    }
  }
  return list;
}

/** A fabric attachment with port 1 of each adapter. */
export function fabric(name: string, hcas: string[], rate = 400): FabricAttachment {
  const roce = name.startsWith("roce");
  return {
    fabric: name,
    hcas: [...hcas],
    ports: hcas.map((hca) => ({
      hca,
      port: 1,
      link_layer: roce ? "roce" : "infiniband",
      rate_gbps: rate,
      roce_v2_gid_index: roce ? 3 : null,
    })),
    rate_gbps: rate,
  };
}

/** An allocation of one shard. */
export function alloc(
  replica: string,
  gpuIndices: number[],
  deployment: string | null = null,
): Allocation {
  return { replica_id: replica, shard_id: `${replica}/0`, deployment, gpu_indices: gpuIndices };
}

/** Options of {@link node}. */
export interface NodeOptions {
  /** Default ready. */
  state?: NodeState;
  /** Default {}. */
  labels?: Record<string, string>;
  /** Default eight healthy h100-80g GPUs without NVLink. */
  gpus?: Gpu[];
  /** Default none. */
  fabrics?: FabricAttachment[];
  /** Default none. */
  allocations?: Allocation[];
  /** Installed engines (design §14); default none reported (unknown). */
  engine_versions?: Record<string, string>;
}

/** One node. */
export function node(id: string, o: NodeOptions = {}): ClusterNode {
  return {
    id,
    hostname: id,
    mgmt_addr: "192.0.2.1",
    mgmt_interface: "eth0",
    state: o.state ?? "ready",
    labels: o.labels ?? {},
    gpus: o.gpus ?? gpus(8),
    fabrics: o.fabrics ?? [],
    allocations: o.allocations ?? [],
    ...(o.engine_versions === undefined ? {} : { engine_versions: o.engine_versions }),
  };
}

/** A profile: fields not given default to one node × gpus_per_node (default 8) of h100-80g. */
export function profile(p: Partial<Profile> & { name: string }): Profile {
  const nodes = p.nodes ?? 1;
  const gpn = p.gpus_per_node ?? 8;
  return {
    engine: "vllm",
    gpu_class: "h100-80g",
    tensor_parallel: nodes * gpn,
    pipeline_parallel: 1,
    quantization: "none",
    engine_args: [],
    engine_options: {},
    env: {},
    node_selector: {},
    ...p,
    nodes,
    gpus_per_node: gpn,
  };
}

/** A deployment named `dep` (unless given) with these profiles. */
export function deployment(
  profiles: Profile[],
  o: { name?: string; placement?: "pack" | "spread" } = {},
): Deployment {
  const name = o.name ?? "dep";
  return {
    name,
    model: "org/model",
    served_model_name: name,
    replicas: 1,
    placement: o.placement ?? "pack",
    profiles,
  };
}
