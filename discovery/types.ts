/**
 * The node inventory as the scheduler sees it (design §4, §5). These are wire
 * types: the JSON `llmgw agent inventory --json` prints and the agent sends
 * when it registers, so their field names are snake_case. Unknown values are
 * `null`, never a silent zero (design §5.1).
 *
 * @module
 */

/** Conditions that keep a GPU out of placement (design §5.1). */
export interface GpuHealth {
  /** Uncorrected volatile ECC errors; `null` when the driver does not report them. */
  ecc_errors: number | null;
  /** Die temperature in °C; `null` when unknown. */
  temperature_c: number | null;
  /** Human-readable reasons not to place work here; empty means healthy. */
  problems: string[];
}

/** One GPU on a node (design §5.1). */
export interface Gpu {
  /** nvidia-smi's index, the number `CUDA_VISIBLE_DEVICES` uses. */
  index: number;
  /** The GPU's UUID, e.g. `GPU-…`; `null` when unknown. */
  uuid: string | null;
  /** The name, as printed by its source. */
  name: string | null;
  /** The placement class (design §2), e.g. `h100-80g`; `null` when name or memory is unknown. */
  class: string | null;
  /** Total memory in MiB as the driver reports it. */
  memory_total_mb: number | null;
  /** Memory in use in MiB. */
  memory_used_mb: number | null;
  /** e.g. "9.0"; gates fp8 (design §6.2). */
  compute_capability: string | null;
  /** NUMA node; `null` when unknown or the machine has none. */
  numa_node: number | null;
  /** Normalised: lower-case, 4-digit domain, e.g. "0000:18:00.0". */
  pci_bus_id: string | null;
  /** The NVIDIA driver version. */
  driver_version: string | null;
  /** The highest CUDA version the driver supports. */
  cuda_version: string | null;
  /** Indices of GPUs reachable over NVLink (`NV#` in `nvidia-smi topo -m`), sorted. */
  nvlink_peers: number[];
  /** Health conditions (design §5.1). */
  health: GpuHealth;
}

/** The link layer of an RDMA port: native InfiniBand, or RoCE over Ethernet. */
export type LinkLayer = "infiniband" | "roce";

/** One port of an InfiniBand/RoCE adapter (design §5.2). */
export interface HcaPort {
  /** The port number (1-based, as in sysfs). */
  port: number;
  /** As sysfs says, e.g. "ACTIVE", "DOWN"; `null` when unreadable. */
  state: string | null;
  /** As sysfs says, e.g. "LinkUp", "Disabled"; `null` when unreadable. */
  physical_state: string | null;
  /** Link rate in Gb/s; `null` when unreadable. */
  rate_gbps: number | null;
  /** InfiniBand or RoCE; `null` when unreadable. */
  link_layer: LinkLayer | null;
  /** The RoCE v2 GID index NCCL should use (`NCCL_IB_GID_INDEX`); `null` for InfiniBand. */
  roce_v2_gid_index: number | null;
  /** ACTIVE and LinkUp: the only ports a fabric ever uses. */
  active: boolean;
}

/** One InfiniBand/RoCE adapter from `<sysfs>/class/infiniband/<name>`. */
export interface Hca {
  /** The name, as printed by its source. */
  name: string;
  /** PCI address, lower-case with a 4-digit domain; `null` when unknown. */
  pci_bus_id: string | null;
  /** NUMA node; `null` when unknown or the machine has none. */
  numa_node: number | null;
  /** The adapter's ports, by port number. */
  ports: HcaPort[];
  /** Attribute files that were missing or malformed, per item; never fatal. */
  problems: string[];
}

/** One active port a fabric attachment uses, with what NCCL needs to use it. */
export interface FabricPort {
  /** The adapter's name, e.g. `mlx5_0`. */
  hca: string;
  /** The port number (1-based, as in sysfs). */
  port: number;
  /** InfiniBand or RoCE; `null` when unreadable. */
  link_layer: LinkLayer | null;
  /** Link rate in Gb/s; `null` when unreadable. */
  rate_gbps: number | null;
  /** The RoCE v2 GID index for `NCCL_IB_GID_INDEX`; `null` for InfiniBand. */
  roce_v2_gid_index: number | null;
}

/** A node's attachment to an operator-named fabric (design §5.2). */
export interface FabricAttachment {
  /** The operator's fabric name. */
  fabric: string;
  /** The HCAs with at least one active port, sorted. */
  hcas: string[];
  /** The active ports used, in HCA then port order. */
  ports: FabricPort[];
  /** The rate of the slowest active port: a collective runs at its slowest link. */
  rate_gbps: number | null;
}

/** Which backend produced the GPU list, so "no GPUs" and "discovery failed" differ. */
export type GpuSource = "nvidia-smi" | "none" | "nvidia-smi-failed";

/** Everything discovery found on a node. */
export interface Inventory {
  /** The GPUs, sorted by index. */
  gpus: Gpu[];
  /** The RDMA adapters, sorted naturally by name. */
  hcas: Hca[];
  /** This node's fabric attachments, sorted by fabric name. */
  fabrics: FabricAttachment[];
  /** Which backend produced the GPU list. */
  source: GpuSource;
  /** Node-level problems: nvidia-smi failures, unparsable output, unreadable sysfs. */
  problems: string[];
  /** Operator configuration that does not match the hardware (unknown or down HCAs). */
  warnings: string[];
}
