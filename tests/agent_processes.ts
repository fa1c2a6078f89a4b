/**
 * Starts `llmgw agent run` as a real process on a simulated machine
 * (dev/machines), with the fake engine on its PATH. The caller kills
 * it, and the engines' process groups, in a `finally`.
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { PortRange } from "../supervisor/port_allocator.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/**
 * Spawns an agent process in its own process group. `args` are flag and
 * value pairs that replace the defaults of the same flags (e.g.
 * `--proxy-listen 127.0.0.1:PORT`, for an agent restarted on the same ports).
 * `ports` is its engines' range, from the test file's plan (tests/port_plan.ts).
 */
export function spawnAgent(
  controlUrl: string,
  joinToken: string,
  id: string,
  machine: string,
  stateDir: string,
  ports: PortRange,
  env: Record<string, string> = {},
  args: string[] = [],
): Deno.ChildProcess {
  const sim = join(ROOT, "dev/machines", machine);
  const flags: Record<string, string> = {
    "--listen": "127.0.0.1:0",
    "--proxy-listen": "127.0.0.1:0",
    "--ports": `${ports.from}-${ports.to}`,
  };
  for (let i = 0; i + 1 < args.length; i += 2) flags[args[i]] = args[i + 1];
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      join(ROOT, "main.ts"),
      "agent",
      "run",
      "--control",
      controlUrl,
      "--node-id",
      id,
      "--state-dir",
      stateDir,
      "--config",
      join(sim, "agent.json"),
      "--mgmt-addr",
      "127.0.0.1",
      "--mgmt-interface",
      "lo",
      ...Object.entries(flags).flat(),
    ],
    env: {
      LLMGW_JOIN_TOKEN: joinToken,
      PATH: `${join(ROOT, "dev/fake_engine/bin")}:${Deno.env.get("PATH")}`,
      FAKE_ENGINE_LOAD_SECONDS: "0.3",
      FAKE_ENGINE_ACCESS_LOG: "0",
      ...env,
    },
    stdout: "null",
    // LLMGW_TEST_AGENT_STDERR=1 shows the agents' logs, to debug a test.
    stderr: Deno.env.get("LLMGW_TEST_AGENT_STDERR") ? "inherit" : "null",
    detached: true,
  }).spawn();
}

/** The pids in every pid file under an agent's state directory (its engines). */
export function enginePids(stateDir: string): number[] {
  const out: number[] = [];
  try {
    for (const e of Deno.readDirSync(join(stateDir, "shards"))) {
      try {
        out.push(
          JSON.parse(Deno.readTextFileSync(join(stateDir, "shards", e.name, "pid.json"))).pid,
        );
      } catch {
        // No pid file.
      }
    }
  } catch {
    // No shards.
  }
  return out;
}

/**
 * Stops agent processes and every engine they left: `signal` to each agent,
 * a wait for each to exit, then SIGKILL to each engine's process group named
 * by a pid file under `stateDirs`, and to the `extraGroups` a test tracked
 * itself. Never throws for a process already gone.
 */
export async function stopAgentsAndEngines(
  agents: readonly Deno.ChildProcess[],
  stateDirs: readonly string[],
  signal: Deno.Signal = "SIGTERM",
  extraGroups: Iterable<number> = [],
): Promise<void> {
  for (const p of agents) kill(p.pid, signal);
  await Promise.all(agents.map((p) => p.status));
  const groups = new Set(extraGroups);
  for (const d of stateDirs) for (const pid of enginePids(d)) groups.add(pid);
  for (const g of groups) kill(-g, "SIGKILL");
}

function kill(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(pid, signal);
  } catch {
    // Gone.
  }
}
