/**
 * A run's probes (design §9.3): whose socket is on the shard's port, and
 * the plugin's HTTP checks against it. Readiness is bound to the process
 * llmgw started: whatever else answers on the port is not this shard. The
 * runner (shard_runner.ts) acts on the answers.
 *
 * @module
 */
import type { EngineProbes } from "../engines/types.ts";
import type { EngineProcess } from "./engine_process.ts";
import { describeHolders, portOwnership } from "./listen_owner.ts";
import { runHttpCheck } from "./probes.ts";
import { ownershipHint } from "./shard_ports.ts";
import type { ProbeResult } from "./shard_machine.ts";

/**
 * How long a port found held by a stranger waits for the engine's own exit
 * before blaming the holder: a socket of an engine being killed is listed a
 * moment after its process lets go of it.
 */
export const EXIT_SETTLE_MS = 500;

/** Whose the socket on a run's port is. */
export type PortVerdict =
  /** The run's own process group listens there. */
  | { kind: "ours" }
  /** Not (yet) the run's: nothing listens, or /proc cannot tell; `hint` says which. */
  | { kind: "not_yet"; hint: string | null }
  /** The run's process ended meanwhile: its exit is the cause, not the socket. */
  | { kind: "ended" }
  /** Another process holds the port. */
  | { kind: "foreign"; holder: string };

/**
 * Judges the socket on `port`. An engine that has just died can still be
 * listed as listening with no process holding it, so a stranger is blamed
 * only after the run's process has had {@link EXIT_SETTLE_MS} to end, and
 * after a second look.
 */
export async function judgePort(
  proc: EngineProcess,
  port: number,
  procRoot: string,
): Promise<PortVerdict> {
  let owner = portOwnership(port, proc.members(), procRoot);
  if (owner.kind === "foreign") {
    if (await proc.endsWithin(EXIT_SETTLE_MS)) return { kind: "ended" };
    // The first look may have caught a socket being torn down.
    owner = portOwnership(port, proc.members(), procRoot);
  }
  if (owner.kind === "ours") return { kind: "ours" };
  if (owner.kind === "foreign") return { kind: "foreign", holder: describeHolders(owner.holders) };
  return { kind: "not_yet", hint: ownershipHint(owner, port) };
}

/** Where and how a run's HTTP checks connect. */
export interface CheckTarget {
  /** Host the probes connect to. */
  host: string;
  /** The run's HTTP port. */
  port: number;
  /** One check's deadline. */
  timeoutMs: number;
  /** The engine's key, sent as a bearer token; null when it takes none. */
  key: string | null;
}

/**
 * Runs the readiness or liveness checks of `probes` and sums them up for the
 * machine (shard_machine.ts).
 */
export async function runChecks(
  probes: EngineProbes,
  mode: "readiness" | "liveness",
  target: CheckTarget,
): Promise<ProbeResult> {
  const auth = target.key === null ? undefined : { authorization: `Bearer ${target.key}` };
  const checks = mode === "liveness" ? probes.liveness : probes.readiness;
  // Ranks that serve no HTTP have no checks: readiness is rank 0's.
  if (mode === "readiness" && checks.length === 0) return { kind: "no_readiness" };
  const results = await Promise.all(
    checks.map((c) => runHttpCheck(target.host, target.port, c, target.timeoutMs, auth)),
  );
  if (mode === "liveness") {
    const bad = results.find((r) => !r.ok);
    return { kind: "liveness", ok: bad === undefined, detail: bad?.detail ?? "" };
  }
  return {
    kind: "readiness",
    ok: results.every((r) => r.ok),
    answered: results.some((r) => r.answered),
    detail: results.map((r) => r.detail).join(", "),
    port: target.port,
  };
}
