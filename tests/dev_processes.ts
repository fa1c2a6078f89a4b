/**
 * `llmgw dev` as a real process, for tests: the port layout a test may
 * take (checked free now), spawning with its output kept, and stopping it
 * and every engine it started.
 *
 * @module
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEV_NODES, DEV_PORT_SPAN, devPorts } from "../cli/dev_ports.ts";
import type { PortRange } from "../supervisor/port_allocator.ts";
import { enginePids } from "./agent_processes.ts";
import { portBlock } from "./port_plan.ts";
import { until } from "./until.ts";
import { isRunning } from "../supervisor/proc.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** The ports of a dev cluster on `base` that something listens on (its engines' are checked by their agent). */
export function fixedPorts(base: number): number[] {
  const p = devPorts(base);
  return [p.control, p.gateway, p.hub, p.hubCdn, ...p.agents.flatMap((a) => [a.api, a.proxy])];
}

/** The pid of the fake hub a dev started, from its banner's hub line; null before the banner. */
export function devHubPid(stdout: string): number | null {
  const m = /^ {2}hub {12}\S+ \(the fake hub, pid (\d+)/m.exec(stdout);
  return m === null ? null : Number(m[1]);
}

function bindable(port: number): boolean {
  try {
    Deno.listen({ hostname: "127.0.0.1", port }).close();
    return true;
  } catch {
    return false;
  }
}

/**
 * `count` `--port` values of `range`, the test file's own
 * (tests/port_plan.ts), {@link DEV_PORT_SPAN} apart, whose listeners' ports
 * are free now: files running in parallel never pick the same layout, and a
 * second run of a file skips the layouts the first one holds.
 */
export function devBases(range: PortRange, count: number): number[] {
  const out: number[] = [];
  const layouts = Math.floor((range.to - range.from + 1) / DEV_PORT_SPAN);
  for (let i = 0; i < layouts && out.length < count; i++) {
    const { from } = portBlock(range, i, DEV_PORT_SPAN);
    if (fixedPorts(from).every(bindable)) out.push(from);
  }
  if (out.length < count) {
    throw new Error(
      `Cannot find ${count} free dev port layouts in ${range.from}-${range.to}: ${out.length} are free`,
    );
  }
  return out;
}

/** A spawned `llmgw dev`. */
export interface DevProcess {
  /** The process. */
  child: Deno.ChildProcess;
  /** Its state directory. */
  dir: string;
  /** What it printed so far, stdout and stderr. */
  output(): { stdout: string; stderr: string };
  /** Its exit status, once it exited. */
  readonly status: Promise<Deno.CommandStatus>;
}

async function collect(stream: ReadableStream<Uint8Array>, into: (t: string) => void) {
  const decoder = new TextDecoder();
  for await (const chunk of stream) into(decoder.decode(chunk, { stream: true }));
}

/** Spawns `llmgw <args>` (from main.ts), keeping what it prints. */
export function spawnLlmgw(
  args: string[],
  env: Record<string, string> = {},
): { child: Deno.ChildProcess; output(): { stdout: string; stderr: string }; done: Promise<void> } {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", join(ROOT, "main.ts"), ...args],
    env,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let stdout = "";
  let stderr = "";
  const done = Promise.all([
    collect(child.stdout, (t) => stdout += t),
    collect(child.stderr, (t) => stderr += t),
  ]).then(() => {});
  return { child, output: () => ({ stdout, stderr }), done };
}

/** Spawns `llmgw dev --port base --dir dir --quiet` plus `extra`, with `env` added to this one's. */
export function spawnDev(
  base: number,
  dir: string,
  extra: string[] = [],
  env: Record<string, string> = {},
): DevProcess {
  const p = spawnLlmgw(["dev", "--port", String(base), "--dir", dir, "--quiet", ...extra], env);
  return {
    child: p.child,
    dir,
    output: p.output,
    status: p.done.then(() => p.child.status),
  };
}

/** What a dev cluster's `dev.env` says. */
export interface DevEnv {
  /** The control plane's URL. */
  url: string;
  /** The admin token. */
  token: string;
  /** The gateway's URL. */
  gatewayUrl: string;
  /** The cluster CA certificate's path (LLMGW_CA). */
  ca: string;
}

/** What `DIR/dev.env` says; null until it is written whole. */
export async function readDevEnv(dir: string): Promise<DevEnv | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(join(dir, "dev.env"));
  } catch {
    return null;
  }
  const v = (k: string) => new RegExp(`^${k}=(\\S+)$`, "m").exec(text)?.[1];
  const [url, token, gatewayUrl, ca] = [
    v("LLMGW_URL"),
    v("LLMGW_TOKEN"),
    v("LLMGW_GATEWAY_URL"),
    v("LLMGW_CA"),
  ];
  return url && token && gatewayUrl && ca ? { url, token, gatewayUrl, ca } : null;
}

/** The pids of the engines a dev cluster's agents have pid files for. */
export function devEnginePids(dir: string): number[] {
  return DEV_NODES.flatMap(([node]) => enginePids(join(dir, "agents", node)));
}

/**
 * Stops a dev process with SIGTERM (it stops its engines) and waits for it;
 * past `timeoutMs` it is killed, and so is every engine group it left.
 * Returns its exit status.
 */
export async function stopDev(dev: DevProcess, timeoutMs = 30_000): Promise<Deno.CommandStatus> {
  try {
    dev.child.kill("SIGTERM");
  } catch {
    // Already gone.
  }
  let status: Deno.CommandStatus | null = null;
  dev.status.then((s) => status = s);
  try {
    return await until("llmgw dev to exit after SIGTERM", () => status, {
      timeoutMs,
      intervalMs: 100,
    });
  } catch (e) {
    try {
      dev.child.kill("SIGKILL");
    } catch {
      // Gone meanwhile.
    }
    throw e;
  } finally {
    // Whatever dev did not stop (it was killed, or failed to) is stopped here: its fake hub
    // (which leaves when its stdin closes, but not if stuck) and its engines.
    const hub = devHubPid(dev.output().stdout);
    if (hub !== null && isRunning(hub)) {
      try {
        Deno.kill(hub, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    for (const pid of devEnginePids(dev.dir)) {
      try {
        Deno.kill(-pid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
  }
}
