/**
 * `deno task test` (issue #24 item 9): every test file, files in parallel.
 *
 * Files run as parallel workers of one `deno test` process; they share no
 * port (tests/port_plan.ts), directory, namespace or environment
 * (tests/parallel_safety_test.ts). Most of a multi-process test's time is
 * spent waiting on its child processes, so the default is more workers than
 * this 2-core machine's cores: `DENO_JOBS` (Deno's own variable) sets the
 * number. The longest files start first, so none of them begins near the end
 * and holds the run up alone.
 *
 * Arguments, when given, replace the file list: `deno task test
 * tests/cluster_test.ts` runs that file alone, in the same way.
 *
 * @module
 */

/** Workers when `DENO_JOBS` is not set: measured in docs/benchmarks.md. */
export const DEFAULT_JOBS = 4;

/**
 * The files that take longest (docs/benchmarks.md), longest first. The rest
 * follow in Deno's order; a file named here is not run twice.
 */
export const LONGEST_FIRST = [
  "tests/hosts/rehearsal_test.ts",
  "tests/hosts/model_fleet_test.ts",
  "tests/ha_failover_test.ts",
  "tests/tls_join_test.ts",
  "tests/cluster_test.ts",
  "tests/rollout_test.ts",
  "bench/agent_restart_test.ts",
  "tests/port_ownership_test.ts",
  "control/store/postgres_store_test.ts",
  "tests/fault_test.ts",
  "bench/ha_benchmarks_test.ts",
  "tests/crash_loop_test.ts",
  "tests/agent_process_test.ts",
];

/** The `deno test` arguments for this script's arguments. */
export function testArgs(args: readonly string[]): string[] {
  return [
    "test",
    "--allow-all",
    "--parallel",
    ...(args.length > 0 ? args : [...LONGEST_FIRST, "."]),
  ];
}

if (import.meta.main) {
  const env: Record<string, string> = Deno.env.get("DENO_JOBS")
    ? {}
    : { DENO_JOBS: String(DEFAULT_JOBS) };
  const child = new Deno.Command(Deno.execPath(), {
    args: testArgs(Deno.args),
    env,
    stdin: "inherit",
    stdout: "inherit",
    stderr: "inherit",
  }).spawn();
  // Ctrl-C reaches both processes (one process group): this one waits for the tests to stop.
  Deno.addSignalListener("SIGINT", () => {});
  const status = await child.status;
  Deno.exit(status.code);
}
