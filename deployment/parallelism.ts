/**
 * The node × GPU × TP × PP arithmetic of design §6.2, in one place: a
 * deployment is refused when its profiles do not add up, and a launch is
 * refused on the same rule, so a profile that reached an agent by another
 * path (an old store, a hand-written launch) cannot start a mis-sized engine.
 *
 * @module
 */

/** The four numbers of a profile that must agree. */
export interface ParallelShape {
  /** Nodes in a replica. */
  nodes: number;
  /** GPUs each node's shard uses. */
  gpus_per_node: number;
  /** Tensor-parallel size of the whole replica. */
  tensor_parallel: number;
  /** Pipeline-parallel size. */
  pipeline_parallel: number;
}

/** One way a shape does not add up, and the field to correct. */
export interface ParallelismProblem {
  /** The profile field the message is about. */
  field: keyof ParallelShape;
  /** What is wrong, with the numbers (no profile name: callers add where). */
  message: string;
}

const FIELDS: readonly (keyof ParallelShape)[] = [
  "nodes",
  "gpus_per_node",
  "tensor_parallel",
  "pipeline_parallel",
];

/**
 * Checks that nodes × gpus_per_node = tensor_parallel × pipeline_parallel,
 * and that a tensor-parallel group either fits in a node (TP divides the
 * node's GPUs) or spans whole nodes (TP is a multiple of them), so no TP
 * group is split unevenly across nodes.
 */
export function parallelismProblems(shape: ParallelShape): ParallelismProblem[] {
  const bad = FIELDS.filter((f) => !Number.isInteger(shape[f]) || shape[f] < 1);
  if (bad.length > 0) {
    // The arithmetic below means nothing on such values.
    return bad.map((f) => ({
      field: f,
      message: `${f} must be a positive integer, got ${shape[f]}`,
    }));
  }
  const out: ParallelismProblem[] = [];
  const { nodes, gpus_per_node: g, tensor_parallel: tp, pipeline_parallel: pp } = shape;
  if (nodes * g !== tp * pp) {
    out.push({
      field: "gpus_per_node",
      message: `nodes × gpus_per_node (${nodes} × ${g} = ${
        nodes * g
      }) must equal tensor_parallel × pipeline_parallel (${tp} × ${pp} = ${tp * pp})`,
    });
  }
  if (g % tp !== 0 && tp % g !== 0) {
    out.push({
      field: "tensor_parallel",
      message:
        `tensor_parallel ${tp} must divide the GPUs of a node (${g}) or span whole nodes (a multiple of ${g})`,
    });
  }
  return out;
}

/**
 * The fewest nodes per replica, more than `shape.nodes`, at which a shard
 * needs at most `maxPerNode` GPUs and the shape still adds up (same TP and
 * PP); null when there is none.
 */
export function nodesToFit(shape: ParallelShape, maxPerNode: number): number | null {
  const total = shape.tensor_parallel * shape.pipeline_parallel;
  if (maxPerNode < 1) return null;
  // Fewer than total ÷ maxPerNode nodes cannot do: start there.
  for (let m = Math.max(shape.nodes + 1, Math.ceil(total / maxPerNode)); m <= total; m++) {
    if (total % m !== 0) continue;
    const wider = { ...shape, nodes: m, gpus_per_node: total / m };
    if (parallelismProblems(wider).length === 0) return m;
  }
  return null;
}

/**
 * What an operator can change when a shard needs more GPUs than any node
 * has: "use nodes: 2 (4 GPUs per node) or a smaller tensor_parallel".
 */
export function tooBigAdvice(shape: ParallelShape, maxPerNode: number): string {
  const m = nodesToFit(shape, maxPerNode);
  const total = shape.tensor_parallel * shape.pipeline_parallel;
  return m === null
    ? "use a smaller tensor_parallel or a GPU class with more GPUs per node"
    : `use nodes: ${m} (${total / m} GPU${
      total / m === 1 ? "" : "s"
    } per node) or a smaller tensor_parallel`;
}
