/**
 * The fixed ports of the test suite, one range per test file (issue #24
 * item 9). `deno task test` runs files in parallel, so two files may not
 * share a port their processes listen on: agents' engine port ranges,
 * `llmgw dev --port` layouts and listeners that a test stops and starts
 * again on the same port are the ones a test must choose itself (every
 * other listener takes port 0). Each such file asks {@link portsOf} for its
 * own range here; `port_plan_test.ts` checks that no two overlap and that
 * all lie below the ephemeral range, where outgoing connections and port-0
 * binds never land.
 *
 * A file runs its own tests one after another, so it may reuse its range
 * from test to test. Within its range a test still takes ports that are
 * free now ({@link freePortsIn}; agents skip held engine ports): a second
 * run of the same file on the machine then finds others.
 *
 * @module
 */
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { isPortFree, type PortRange } from "../supervisor/port_allocator.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/**
 * Engine ports one test agent gets: 20 shards' blocks, as `llmgw dev` gives
 * each of its agents (cli/dev_ports.ts).
 */
export const AGENT_SPAN = 200;

/** Test file (from the repository root) → the ports it may listen on. */
export const PORT_PLAN: Readonly<Record<string, Readonly<PortRange>>> = Object.freeze({
  // `llmgw dev` clusters: each --port takes a span of 1000 (cli/dev_ports.ts), and each file
  // has twice the layouts it runs at once, so a second run of it beside this one finds free ones.
  "tests/dev_cluster_test.ts": { from: 10_000, to: 13_999 },
  "tests/dev_lifecycle_test.ts": { from: 14_000, to: 17_999 },
  "tests/dev_peer_test.ts": { from: 3_000, to: 4_999 },
  "tests/bind_failure_test.ts": { from: 18_000, to: 19_999 },
  "tests/browser/dashboard_test.ts": { from: 20_000, to: 21_999 },
  // Agents' engine ranges, AGENT_SPAN each, and listeners a test brings back on their port.
  "tests/cluster_test.ts": { from: 22_000, to: 23_999 },
  "tests/rollout_test.ts": { from: 24_000, to: 24_999 },
  "tests/agent_process_test.ts": { from: 25_000, to: 25_999 },
  "tests/fault_test.ts": { from: 26_000, to: 26_999 },
  "tests/port_ownership_test.ts": { from: 27_000, to: 28_999 },
  "bench/agent_restart_test.ts": { from: 29_000, to: 29_599 },
  "tests/crash_loop_test.ts": { from: 29_600, to: 30_199 },
  "tests/engine_kill_test.ts": { from: 30_200, to: 30_399 },
  "tests/ha_failover_test.ts": { from: 30_400, to: 30_799 },
  "tests/security_test.ts": { from: 30_800, to: 30_999 },
  "tests/cold_start_test.ts": { from: 31_000, to: 31_099 },
  // Four engines bound at once, seconds after their ports are picked.
  "dev/fake_engine/fake_engine_uvicorn_test.ts": { from: 31_100, to: 31_199 },
  // Roles' processes, bound by children a moment after their ports are picked.
  "tests/role_permissions_test.ts": { from: 31_200, to: 31_299 },
});

/** Thrown for a file with no range in {@link PORT_PLAN}, or a block past its range. */
export class PortPlanError extends Error {
  override name = "PortPlanError";
}

/** The range of the test file at `moduleUrl` (pass `import.meta.url`). */
export function portsOf(moduleUrl: string): PortRange {
  const file = relative(ROOT, fileURLToPath(moduleUrl));
  const range = PORT_PLAN[file];
  if (range === undefined) {
    throw new PortPlanError(`Cannot give ports to ${file}: it has no range in tests/port_plan.ts`);
  }
  return { ...range };
}

/** Each pair of files whose ranges share a port, as "a and b share FROM-TO". */
export function overlaps(plan: Readonly<Record<string, Readonly<PortRange>>>): string[] {
  const entries = Object.entries(plan).sort(([, a], [, b]) => a.from - b.from);
  const found: string[] = [];
  for (const [i, [a, ra]] of entries.entries()) {
    for (const [b, rb] of entries.slice(i + 1)) {
      if (rb.from > ra.to) break;
      found.push(`${a} and ${b} share ${rb.from}-${Math.min(ra.to, rb.to)}`);
    }
  }
  return found;
}

/** The `i`-th block of `size` ports of `range` (from 0); throws when it would pass the range's end. */
export function portBlock(range: PortRange, i: number, size: number = AGENT_SPAN): PortRange {
  const from = range.from + size * i;
  const to = from + size - 1;
  if (!Number.isInteger(i) || i < 0 || to > range.to) {
    throw new PortPlanError(
      `Cannot give block ${i} of ${size} ports: range ${range.from}-${range.to} ends first`,
    );
  }
  return { from, to };
}

/**
 * The first `count` ports of `range` that nothing listens on now, for
 * listeners a test stops and starts again on the same port.
 */
export function freePortsIn(range: PortRange, count: number): number[] {
  const found: number[] = [];
  for (let port = range.from; port <= range.to && found.length < count; port++) {
    if (isPortFree(port)) found.push(port);
  }
  if (found.length < count) {
    throw new PortPlanError(
      `Cannot find ${count} free ports in ${range.from}-${range.to}: ${found.length} are free`,
    );
  }
  return found;
}
