/**
 * `llmgw plan`: offline placement for operators and tools (design §7). Places a
 * deployment's replicas one after another on a cluster file and prints each
 * placement or its explanation.
 *
 * Exit codes: 0 all placed, 3 some unschedulable, 2 bad input.
 *
 * @module
 */
import { DeploymentError, parseDeploymentText } from "../deployment/load.ts";
import { classFacts } from "../deployment/validate.ts";
import { ClusterFileError, parseCluster } from "../inventory/cluster_file.ts";
import { applyPlacement, explanationLines, indexCluster, place } from "../placement/mod.ts";
import { formatPath } from "../validation/issues.ts";
import { renderTable } from "../text/table.ts";
import { parseFlags, UsageError } from "./usage_error.ts";
import { EngineRegistry, pluginDirsFromEnv } from "../engines/registry.ts";
import { checkEngines } from "../engines/check_deployment.ts";
import { modelIssues } from "../deployment/model_fit.ts";
import { localModelDir, readModelDir } from "../models/facts_source.ts";
import type { ModelFacts } from "../models/model_facts.ts";
import { errorMessage } from "../text/error_message.ts";
import { concreteLaunches, shardLaunches } from "../engines/launch.ts";
import { PORT_BLOCK } from "../engines/port_block.ts";
import { DEFAULT_PORT_RANGE } from "../supervisor/port_allocator.ts";
import type { ShardSpec } from "../engines/types.ts";
import type { Explanation, Placed, ShardPlacement, Unschedulable } from "../placement/types.ts";
import { replicaId } from "../protocol/ids.ts";
import { shellQuote } from "../text/shell_quote.ts";
import { planIndexOptions, planModelCommit } from "./plan_model_caches.ts";

/** Usage of the command. */
export const PLAN_USAGE =
  `Usage: llmgw plan --cluster CLUSTER.json --deployment DEPLOY.yaml [options]

Places the deployment's replicas one after another on the cluster file and
prints each placement, or why it is unschedulable: per profile tried, the
rejected nodes grouped by reason with counts ("8,213 nodes: insufficient_gpus
— needs 8 free h100-80g GPUs, has 0–4 free (e.g. …)"), and for a multi-node
replica each fabric passed over and why.

Options:
  --cluster FILE      nodes with inventory, state, labels, allocations and,
                      optionally, each node's model cache as its agent reports
                      it in heartbeats (JSON)
  --deployment FILE   the deployment (YAML or JSON)
  --replicas N        how many replicas to place (default: the deployment's)
  --model-config DIR  a directory with the model's config.json (and
                      model.safetensors.index.json or its *.safetensors): GPUs
                      too small for the model and a tensor_parallel that does
                      not divide its heads are refused (default: the
                      deployment's model, when it is a local path here); with
                      model caches in the cluster file, nodes without room
                      for its files are refused (insufficient_disk)
  --model-commit SHA  the commit the deployment's revision resolves to: nodes
                      whose cache holds it are preferred (default: the
                      revision, when it is a commit)
  --engine-plugins DIR  directory of llmgw-engine-* plugins (repeatable; also
                      LLMGW_ENGINE_PLUGINS, colon-separated)
  --detail            every rejected node on its own line instead of the groups,
                      for placed replicas too, and every fabric considered
  --json              print one JSON object; the same rules: groups for
                      unschedulable replicas only, per-node lists with --detail
Each placed shard shows the command and environment it would run with.
Exit codes: 0 all placed, 3 some unschedulable or unable to start, 2 bad input.
`;

/** Runs the command; returns the exit code. */
export async function planCommand(
  args: string[],
  out: (t: string) => void,
  err: (t: string) => void,
): Promise<number> {
  const { values, positionals } = parseFlags("plan", args, {
    cluster: { type: "string" },
    deployment: { type: "string" },
    replicas: { type: "string" },
    "model-config": { type: "string" },
    "model-commit": { type: "string" },
    "engine-plugins": { type: "string", multiple: true },
    json: { type: "boolean" },
    detail: { type: "boolean" },
    help: { type: "boolean", short: "h" },
  });
  if (values.help) {
    out(PLAN_USAGE);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`plan: unexpected argument "${positionals[0]}"`);
  if (values.cluster === undefined) throw new UsageError("plan: --cluster FILE is required");
  if (values.deployment === undefined) throw new UsageError("plan: --deployment FILE is required");
  let replicas: number | undefined;
  if (values.replicas !== undefined) {
    if (!/^\d+$/.test(values.replicas) || Number(values.replicas) > 10_000) {
      throw new UsageError(
        `plan: --replicas must be a whole number 0-10000, got "${values.replicas}"`,
      );
    }
    replicas = Number(values.replicas);
  }
  const registry = await EngineRegistry.load([
    ...pluginDirsFromEnv(),
    ...(values["engine-plugins"] ?? []),
  ]);
  for (const p of registry.problems) err(`llmgw: warning: ${p}\n`);
  const { nodes, caches } = await readInput(
    values.cluster,
    (text) => parseCluster(text, values.cluster!),
  );
  const { deployment, warnings } = await readInput(
    values.deployment,
    (text) =>
      parseDeploymentText(text, values.deployment!, {
        classes: classFacts(nodes),
        knownEngines: registry.names(),
      }),
  );
  // The same engine checks `apply` runs before anything is stored.
  try {
    await checkEngines(deployment, values.deployment, registry, classFacts(nodes));
  } catch (e) {
    if (e instanceof DeploymentError) throw new UsageError(e.message);
    throw e;
  }
  const facts = await planModelFacts(values["model-config"], deployment.model, err);
  const memory = classFacts(nodes).memoryBytes;
  const model = modelIssues(deployment, facts, (c) => memory?.get(c));
  if (model.errors.length > 0) {
    throw new UsageError(new DeploymentError(values.deployment, model.errors).message);
  }
  for (const w of [...warnings, ...model.warnings]) {
    err(`llmgw: warning: ${values.deployment}: ${formatPath(w.path)}: ${w.message}\n`);
  }
  const commit = planModelCommit(deployment, values["model-commit"]);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const index = indexCluster(
    nodes,
    planIndexOptions(caches, deployment, commit, (m) => err(`llmgw: warning: ${m}\n`)),
  );
  // Agents allocate ports when they launch; a dry run shows the blocks a
  // fresh agent with the default range would take, in order on each node.
  const blocks = new Map<string, number>();
  const nextPorts = (node: string): number => {
    const first = blocks.get(node) ?? DEFAULT_PORT_RANGE.from;
    blocks.set(node, first + PORT_BLOCK);
    return first;
  };
  const results: PlannedReplica[] = [];
  let allRunnable = true;
  const detail = values.detail === true;
  for (let r = 0; r < (replicas ?? deployment.replicas); r++) {
    const id = replicaId(deployment.name, r);
    const result = place(index, deployment, id, {
      detail: detail ? "full" : "grouped",
      model: facts,
    });
    if (result.status !== "placed") {
      allRunnable = false;
      results.push(result);
      continue;
    }
    applyPlacement(index, deployment.name, result.shards);
    const driver = registry.get(result.engine)!;
    const launches = concreteLaunches(shardLaunches(result, deployment, byId), nextPorts);
    const specs = await Promise.all(launches.map((launch) => driver.prepare(launch)));
    if (specs.some((s) => s.problems.length > 0)) allRunnable = false;
    results.push({
      ...result,
      shards: result.shards.map((s, i) => withCommand(s, specs[i])),
      // Per-node detail for placed replicas only when asked for.
      explanation: detail ? result.explanation : withoutGroups(result.explanation),
    });
  }
  if (values.json) out(JSON.stringify({ replicas: results }, null, 2) + "\n");
  else out(formatResults(results, { detail }));
  return allRunnable ? 0 : 3;
}

/**
 * The model's facts for the plan: from `--model-config DIR` (unreadable: bad
 * input), else from the deployment's model when it is a local path here
 * (unreadable: a warning, and memory is not checked), else unknown.
 */
async function planModelFacts(
  dir: string | undefined,
  model: string,
  err: (t: string) => void,
): Promise<ModelFacts | null> {
  if (dir !== undefined) {
    try {
      return await readModelDir(dir.replace(/\/+$/, ""));
    } catch (e) {
      throw new UsageError(`plan: --model-config: ${errorMessage(e)}`);
    }
  }
  const local = localModelDir(model);
  if (local === null) return null;
  try {
    return await readModelDir(local.replace(/\/+$/, ""));
  } catch (e) {
    err(
      `llmgw: warning: the model's memory and tensor_parallel were not checked: ${
        errorMessage(e)
      }\n`,
    );
    return null;
  }
}

/** A shard with what it would run (argv and env), or why it cannot start. */
export interface PlannedShard extends ShardPlacement {
  /** The command line; empty when the shard cannot start. */
  argv: string[];
  /** The environment llmgw adds. */
  env: Record<string, string>;
  /** Why the engine refuses this shard; absent when it can start. */
  problems?: string[];
}

/** A plan result: unschedulable, or placed with each shard's command. */
export type PlannedReplica =
  | Unschedulable
  | (Placed & { shards: PlannedShard[] });

function withoutGroups(explanation: Explanation): Explanation {
  return { ...explanation, profiles: explanation.profiles.map(({ groups: _, ...a }) => a) };
}

function withCommand(shard: ShardPlacement, spec: ShardSpec): PlannedShard {
  const planned: PlannedShard = {
    ...shard,
    argv: spec.command?.argv ?? [],
    env: spec.command?.env ?? {},
  };
  if (spec.problems.length > 0) planned.problems = spec.problems;
  return planned;
}

async function readInput<T>(path: string, parse: (text: string) => T): Promise<T> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    throw new UsageError(
      `plan: cannot read ${path}: ${
        e instanceof Deno.errors.NotFound ? "no such file" : String(e)
      }`,
    );
  }
  try {
    return parse(text);
  } catch (e) {
    if (e instanceof ClusterFileError || e instanceof DeploymentError) {
      throw new UsageError(e.message);
    }
    throw e;
  }
}

/**
 * Formats results for people: one block per replica. The explanations'
 * rejections are grouped by reason unless `detail` asks for every node.
 */
export function formatResults(
  results: readonly PlannedReplica[],
  options: { detail?: boolean } = {},
): string {
  const out: string[] = [];
  for (const r of results) {
    out.push(`replica ${r.replica_id}: ${r.status}`);
    if (r.status === "placed") {
      out.push(
        renderTable(
          ["RANK", "NODE", "GPUS", "CLASS", "FABRIC", "HCAS"],
          r.shards.map((s) => [
            String(s.rank),
            s.node,
            s.gpu_indices.join(","),
            s.gpu_class,
            s.fabric ?? "-",
            s.hcas.length === 0 ? "-" : s.hcas.join(","),
          ]),
        ).split("\n").map((l) => `  ${l}`).join("\n"),
      );
      for (const s of r.shards) {
        if (s.problems !== undefined) {
          out.push(`  rank ${s.rank} cannot start: ${s.problems.join("; ")}`);
          continue;
        }
        const env = Object.entries(s.env).map(([k, v]) => `${k}=${shellQuote(v)}`).join(" ");
        out.push(`  rank ${s.rank} on ${s.node}: ${env} ${s.argv.map(shellQuote).join(" ")}`);
      }
    }
    out.push(...explanationLines(r.explanation, options).map((l) => `  ${l}`), "");
  }
  return out.join("\n");
}
