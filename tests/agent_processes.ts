/**
 * Starts `llmgw agent run` as a real process on a simulated machine
 * (tests/fixtures/sim), with the fake engine on its PATH. The caller kills
 * it, and the engines' process groups, in a `finally`.
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** Spawns an agent process in its own process group. */
export function spawnAgent(
  controlUrl: string,
  joinToken: string,
  id: string,
  machine: string,
  stateDir: string,
  portBase: number,
  env: Record<string, string> = {},
): Deno.ChildProcess {
  const sim = join(ROOT, "tests/fixtures/sim", machine);
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
      "--listen",
      "127.0.0.1:0",
      "--proxy-listen",
      "127.0.0.1:0",
      "--ports",
      `${portBase}-${portBase + 999}`,
    ],
    env: {
      LLMGW_JOIN_TOKEN: joinToken,
      PATH: `${join(ROOT, "testing/bin")}:${Deno.env.get("PATH")}`,
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
