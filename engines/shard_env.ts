/**
 * The one place that builds a shard's GPU and NCCL environment (design §5.3),
 * shared by every engine plugin, built-in or not. Its variables override
 * anything a plugin or profile sets, and a profile may not set them at all.
 *
 * @module
 */
import type { ShardLaunch } from "./types.ts";

/** Variables only llmgw sets: a profile's `env` naming one is refused. */
export const OWNED_ENV: ReadonlySet<string> = new Set([
  "CUDA_VISIBLE_DEVICES",
  "CUDA_DEVICE_ORDER",
  "NCCL_IB_HCA",
  "NCCL_IB_GID_INDEX",
  "NCCL_SOCKET_IFNAME",
  "GLOO_SOCKET_IFNAME",
  "NCCL_IB_DISABLE",
]);

/**
 * Builds the shard's GPU and NCCL environment:
 * - `CUDA_VISIBLE_DEVICES` lists the shard's GPUs by nvidia-smi index, with
 *   `CUDA_DEVICE_ORDER=PCI_BUS_ID` so CUDA numbers them as nvidia-smi does
 *   (CUDA's default order is fastest-first, which need not match).
 * - A multi-node shard gets `NCCL_IB_HCA` in NCCL's exact-match form
 *   (`=mlx5_0:1,mlx5_1:1`: without the leading `=` names are prefixes and
 *   `mlx5_1` also matches `mlx5_10`), listing exactly the replica's fabric's
 *   ports on this node, so NCCL can never pick an adapter on another fabric.
 *   RoCE adds `NCCL_IB_GID_INDEX`. The bootstrap interfaces
 *   (`NCCL_SOCKET_IFNAME`, exact match, and `GLOO_SOCKET_IFNAME`) are the
 *   node's management interface.
 * - A single-node shard gets no IB or socket settings: NVLink/PCIe carry its
 *   traffic and NCCL's defaults are right.
 *
 * Call {@link shardEnvProblems} first: this function assumes a valid launch.
 */
export function shardEnv(launch: ShardLaunch): Record<string, string> {
  const env: Record<string, string> = {
    CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    CUDA_VISIBLE_DEVICES: launch.gpus.map((g) => g.index).join(","),
  };
  if (launch.world.nodes === 1 || launch.fabric === null) return env;
  const ports = launch.fabric.ports;
  env.NCCL_IB_HCA = "=" + ports.map((p) => `${p.hca}:${p.port}`).join(",");
  const gid = roceGidIndex(launch);
  if (gid !== null) env.NCCL_IB_GID_INDEX = String(gid);
  if (launch.node.mgmt_interface !== null) {
    env.NCCL_SOCKET_IFNAME = `=${launch.node.mgmt_interface}`;
    // Gloo takes plain interface names: no '=' or '^' syntax.
    env.GLOO_SOCKET_IFNAME = launch.node.mgmt_interface;
  }
  return env;
}

function roceGidIndex(launch: ShardLaunch): number | null {
  const roce = launch.fabric?.ports.filter((p) => p.link_layer === "roce") ?? [];
  return roce.length === 0 ? null : roce[0].roce_v2_gid_index;
}

/** Problems that make {@link shardEnv} impossible or unsafe for this launch. */
export function shardEnvProblems(launch: ShardLaunch): string[] {
  const problems: string[] = [];
  for (const key of Object.keys(launch.profile.env)) {
    if (OWNED_ENV.has(key)) {
      problems.push(
        `profile "${launch.profile.name}": env ${key} is set by llmgw (design §5.3); remove it from the profile`,
      );
    }
  }
  if (launch.world.nodes === 1) return problems;
  const at = `shard ${launch.shard_id} on node ${launch.node.id}`;
  if (launch.fabric === null || launch.fabric.ports.length === 0) {
    problems.push(
      `${at}: a multi-node replica needs the fabric's adapters on every node (design §5.3)`,
    );
    return problems;
  }
  const roce = launch.fabric.ports.filter((p) => p.link_layer === "roce");
  if (roce.length > 0 && roce.length < launch.fabric.ports.length) {
    problems.push(`${at}: fabric ${launch.fabric.name} mixes InfiniBand and RoCE ports`);
  }
  const gids = new Set(roce.map((p) => p.roce_v2_gid_index));
  if (gids.has(null)) {
    problems.push(`${at}: a RoCE port of fabric ${launch.fabric.name} has no RoCE v2 GID index`);
  } else if (gids.size > 1) {
    problems.push(
      `${at}: RoCE ports of fabric ${launch.fabric.name} use different GID indices (${
        [...gids].join(", ")
      }); NCCL_IB_GID_INDEX is one value`,
    );
  }
  if (launch.node.mgmt_interface === null) {
    problems.push(
      `${at}: the node's management interface is unknown, so NCCL_SOCKET_IFNAME cannot be set; a wrong guess hangs the rendezvous`,
    );
  }
  return problems;
}
