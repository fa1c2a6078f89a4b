/**
 * `llmgw plan` end to end at scale (design §16): writes a synthetic cluster
 * file (bench/synthetic_cluster.ts, 10,000 nodes × 8 GPUs by default) and two
 * deployments, then times `llmgw plan --json` as a subprocess at two replica
 * counts. The difference removes the fixed cost (start-up, reading and
 * validating the cluster file, indexing), so
 * placements/s = Δreplicas / Δseconds is the cost of each placement beyond
 * the first, with its engine command, explanation and JSON output.
 *
 * The machine is shared and a run carries about a second of fixed work, so
 * each round runs each count `--repeat` times, interleaved, and keeps the
 * fastest (noise only ever adds time). Seconds are wall time and, where
 * `/usr/bin/time` exists, CPU time (user + system) of the subprocess, which
 * other processes on the machine disturb far less.
 *
 * Run: `deno run -A bench/plan_scale.ts [--nodes 10000] [--replicas 1000,3000]
 * [--rounds 3] [--repeat 5] [--keep DIR]` (copy the table into
 * docs/benchmarks.md).
 */
import { parseArgs } from "node:util";
import { multiNode, singleNode, syntheticCluster } from "./synthetic_cluster.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: {
    nodes: { type: "string", default: "10000" },
    replicas: { type: "string", default: "1000,3000" },
    rounds: { type: "string", default: "3" },
    repeat: { type: "string", default: "5" },
    keep: { type: "string" },
  },
});
const nodes = Number(args.nodes);
const counts = args.replicas.split(",").map(Number);
const rounds = Number(args.rounds);
const repeat = Number(args.repeat);
if (
  !Number.isInteger(nodes) || nodes < 1 || counts.length !== 2 ||
  !counts.every((c) => Number.isInteger(c) && c >= 0) || counts[0] >= counts[1] ||
  !Number.isInteger(rounds) || rounds < 1 || !Number.isInteger(repeat) || repeat < 1
) {
  throw new RangeError(
    `Cannot run plan_scale: want --nodes N ≥ 1, --replicas A,B with A < B, --rounds R ≥ 1, --repeat K ≥ 1; got ${
      JSON.stringify(args)
    }`,
  );
}

const dir = args.keep ?? await Deno.makeTempDir({ prefix: "llmgw-plan-scale-" });
await Deno.mkdir(dir, { recursive: true });
const cluster = `${dir}/cluster-${nodes}.json`;
await Deno.writeTextFile(cluster, JSON.stringify({ nodes: syntheticCluster(nodes) }));
const cases = [
  { name: "single-node, 2 profiles (first fits nowhere), fp8", deployment: singleNode },
  { name: "multi-node 2×8 A100 on one fabric", deployment: multiNode },
];
for (const c of cases) {
  await Deno.writeTextFile(`${dir}/${c.deployment.name}.json`, JSON.stringify(c.deployment));
}
const main = new URL("../main.ts", import.meta.url).pathname;
const TIME = "/usr/bin/time";
const timed = await Deno.stat(TIME).then(() => true, () => false);

/** One run's figures. */
interface Run {
  /** Wall-clock seconds. */
  wall: number;
  /** User + system CPU seconds of the subprocess; null without /usr/bin/time. */
  cpu: number | null;
  /** Bytes of JSON printed. */
  bytes: number;
  /** Replicas placed. */
  placed: number;
}

/** One `llmgw plan --json` run. */
async function run(deployment: string, replicas: number): Promise<Run> {
  const plan = [
    Deno.execPath(),
    "run",
    "-A",
    main,
    "plan",
    "--cluster",
    cluster,
    "--deployment",
    `${dir}/${deployment}.json`,
    "--replicas",
    String(replicas),
    "--json",
  ];
  const cpuFile = `${dir}/cpu.txt`;
  const argv = timed ? [TIME, "-f", "%U %S", "-o", cpuFile, ...plan] : plan;
  const t0 = performance.now();
  const out = await new Deno.Command(argv[0], { args: argv.slice(1), stdout: "piped" }).output();
  const wall = (performance.now() - t0) / 1000;
  // /usr/bin/time passes the exit status through: 3 is "some unschedulable".
  if (out.code !== 0 && out.code !== 3) throw new Error(`llmgw plan exited ${out.code}`);
  let cpu: number | null = null;
  if (timed) {
    const [user, system] = (await Deno.readTextFile(cpuFile)).trim().split("\n").at(-1)!
      .split(" ").map(Number);
    cpu = user + system;
  }
  const placed = (JSON.parse(new TextDecoder().decode(out.stdout)) as {
    replicas: { status: string }[];
  }).replicas.filter((r) => r.status === "placed").length;
  return { wall, cpu, bytes: out.stdout.length, placed };
}

/** The fastest of `repeat` runs of each count, interleaved; wall and CPU minimums apart. */
async function fastest(deployment: string): Promise<Run[]> {
  const best: Run[] = [];
  for (let k = 0; k < repeat; k++) {
    for (const [i, n] of counts.entries()) {
      const r = await run(deployment, n);
      const b = best[i];
      best[i] = b === undefined ? r : {
        ...r,
        wall: Math.min(b.wall, r.wall),
        cpu: r.cpu === null ? null : Math.min(b.cpu!, r.cpu),
      };
    }
  }
  return best;
}

console.log(
  `cluster: ${nodes} nodes × 8 GPUs; replicas ${
    counts.join(" and ")
  }; fastest of ${repeat} per round; CPU time ${timed ? "from /usr/bin/time" : "not measured"}`,
);
console.log(
  `| case | round | ${counts[0]}: placed, wall s, CPU s, JSON | ${
    counts[1]
  }: placed, wall s, CPU s, JSON | placements/s by wall | by CPU |`,
);
console.log("| --- | --- | --- | --- | --- | --- |");
const cell = (r: Run) =>
  `${r.placed}, ${r.wall.toFixed(2)}, ${r.cpu?.toFixed(2) ?? "-"}, ${
    (r.bytes / 1e6).toFixed(2)
  } MB`;
const rate = (d: number) => (counts[1] - counts[0]) / d;
for (let round = 1; round <= rounds; round++) {
  for (const c of cases) {
    const [a, b] = await fastest(c.deployment.name);
    const byCpu = a.cpu === null ? "-" : rate(b.cpu! - a.cpu).toFixed(0);
    console.log(
      `| ${c.name} | ${round} | ${cell(a)} | ${cell(b)} | ${
        rate(b.wall - a.wall).toFixed(0)
      } | ${byCpu} |`,
    );
  }
}
if (args.keep === undefined) await Deno.remove(dir, { recursive: true });
