/**
 * The engine checks a deployment must pass before anything is stored
 * (design §6.2): for each profile, its engine's own validation and command
 * building, run on a representative launch. `llmgw apply` (through the
 * control plane's API) and `llmgw plan` run the same checks, so nothing that
 * a dry run refuses is accepted and then rebuilt forever.
 *
 * A representative launch is what a placement of the profile would give the
 * engine: its TP × PP, its GPUs of its class (with the highest compute
 * capability the cluster reports for the class), rank 0 of its world and, for
 * a multi-node profile, an InfiniBand fabric port. Checks that depend on one
 * node (its engine version, its adapters) run again at placement and launch.
 *
 * @module
 */
import { DeploymentError } from "../deployment/load.ts";
import type { ClassFacts, DeploymentIssue } from "../deployment/validate.ts";
import type { Deployment, Profile } from "../deployment/schema.ts";
import type { FieldPath } from "../validation/issues.ts";
import { launchProfile } from "./launch.ts";
import { ENGINE_API_VERSION, type ShardLaunch, type ShardSpec } from "./types.ts";
import { errorMessage } from "../text/error_message.ts";
import { checkPlacementId, shardId } from "../protocol/ids.ts";

/** What the checks need of an engine: a name lookup and its prepare step. */
export interface EngineLookup {
  /** The driver for an engine name, if any. */
  get(name: string): { prepare(launch: ShardLaunch): Promise<ShardSpec> } | undefined;
}

/** The compute capability used for a class no node reports yet: the checks stay about arguments. */
const UNKNOWN_CLASS_CAPABILITY = "9.0";

/** The highest compute capability the cluster reports for a class, numerically. */
function bestCapability(facts: ClassFacts | undefined, gpuClass: string): string {
  const seen = [...(facts?.computeCapabilities.get(gpuClass) ?? [])];
  if (seen.length === 0) return UNKNOWN_CLASS_CAPABILITY;
  const value = (cc: string) => {
    const [major, minor] = cc.split(".").map(Number);
    return major * 100 + (minor || 0);
  };
  return seen.reduce((a, b) => (value(b) > value(a) ? b : a));
}

/** The launch rank 0 of a placement of `profile` would get. */
export function representativeLaunch(
  deployment: Deployment,
  profile: Profile,
  facts?: ClassFacts,
): ShardLaunch {
  const cc = bestCapability(facts, profile.gpu_class);
  const multi = profile.nodes > 1;
  return {
    api_version: ENGINE_API_VERSION,
    deployment: deployment.name,
    replica_id: checkPlacementId(deployment.name),
    shard_id: shardId(checkPlacementId(deployment.name), 0),
    model: deployment.model,
    served_model_name: deployment.served_model_name,
    profile: launchProfile(profile),
    rank: 0,
    world: {
      nodes: profile.nodes,
      leader_addr: "192.0.2.1",
      rendezvous_port: 29500,
      leader_http_port: 8000,
    },
    gpus: Array.from(
      { length: profile.gpus_per_node },
      (_, index) => ({ index, class: profile.gpu_class, compute_capability: cc }),
    ),
    fabric: multi
      ? {
        name: "check",
        ports: [{
          hca: "mlx5_0",
          port: 1,
          link_layer: "infiniband",
          rate_gbps: 400,
          roce_v2_gid_index: null,
        }],
      }
      : null,
    node: { id: "check", mgmt_addr: "192.0.2.1", mgmt_interface: multi ? "eth0" : null },
    port: 8000,
    engine_version: null,
  };
}

/** The profile field an engine's problem is about, from the conventional message start. */
export function problemField(message: string): string {
  const text = message.replace(/^profile "[^"]*": /, "");
  const rules: [RegExp, string][] = [
    [/^engine_args\b|\bengine_args\b/, "engine_args"],
    [/^engine_options\b|engine option/, "engine_options"],
    [/^env\b/, "env"],
    [/quantization|\bfp8\b|\bFP8\b/, "quantization"],
    [/nodes × gpus_per_node|GPUs, the profile needs/, "gpus_per_node"],
    [/tensor.parallel/, "tensor_parallel"],
    [/GPU class/, "gpu_class"],
  ];
  for (const [re, field] of rules) if (re.test(text)) return field;
  return "engine";
}

/**
 * Runs each profile's engine checks on its representative launch; returns
 * the problems as issues with their field paths (`profiles[0].engine_args`).
 * Profiles whose engine is unknown are skipped: schema validation names them.
 */
export async function engineIssues(
  deployment: Deployment,
  engines: EngineLookup,
  facts?: ClassFacts,
): Promise<DeploymentIssue[]> {
  const issues: DeploymentIssue[] = [];
  for (const [i, profile] of deployment.profiles.entries()) {
    const driver = engines.get(profile.engine);
    if (driver === undefined) continue;
    let spec: ShardSpec;
    try {
      spec = await driver.prepare(representativeLaunch(deployment, profile, facts));
    } catch (e) {
      issues.push({
        path: ["profiles", i, "engine"],
        message: `profile "${profile.name}": engine ${profile.engine} failed to check it: ${
          errorMessage(e)
        }`,
      });
      continue;
    }
    for (const problem of spec.problems) {
      const path: FieldPath = ["profiles", i, problemField(problem)];
      issues.push({ path, message: problem });
    }
  }
  return issues;
}

/**
 * Refuses a parsed deployment whose engines refuse it: throws a
 * {@link DeploymentError} naming every field path, like schema validation.
 */
export async function checkEngines(
  deployment: Deployment,
  where: string,
  engines: EngineLookup,
  facts?: ClassFacts,
): Promise<void> {
  const issues = await engineIssues(deployment, engines, facts);
  if (issues.length > 0) throw new DeploymentError(where, issues);
}
