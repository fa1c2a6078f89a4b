/**
 * Failover time of highly available control planes (design §11.1, issue
 * #15): two `llmgw control serve` processes on one throwaway PostgreSQL
 * database (tests/postgres_server.ts), plain HTTP, no embedded gateway.
 * Each round finds the leader through `GET /v1/leader`, SIGKILLs it, and
 * measures from the kill, polling the survivor every 20 ms:
 *
 * - until it answers `role: "leader"` with a higher epoch than the killed
 *   leader's;
 * - until an admin write through it succeeds (`POST
 *   /v1/deployments/demo/scale`, the replica count alternating so each one
 *   is a change), polled at the same time.
 *
 * Then it restarts the killed instance (same state directory and port) and
 * waits until it reports `role: "follower"`. A crashed leader's lease runs
 * out between 2/3 of the lease and the whole lease after the kill (it renews
 * every third of it), and the survivor tries to take over once a second
 * (`control serve`'s retry period), so the times are expected near the lease
 * plus up to a second.
 *
 * Prints one markdown table row: the lease, the number of kills, and the
 * median and maximum of both times. Every process it starts is killed by pid
 * on the way out, and its temporary directories are removed.
 *
 * Run: `deno run -A bench/failover_time.ts [--kills 20] [--lease 3]`.
 *
 * @module
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type PostgresServer, startPostgres } from "../tests/postgres_server.ts";

const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    kills: { type: "string", default: "20" },
    lease: { type: "string", default: "3" },
  },
});
const KILLS = Number(flags.kills);
const LEASE_S = Number(flags.lease);
if (!Number.isInteger(KILLS) || KILLS < 1 || KILLS > 1_000) {
  throw new RangeError(
    `Cannot run failover_time: --kills must be an integer from 1 to 1000, got "${flags.kills}"`,
  );
}
if (!Number.isFinite(LEASE_S) || LEASE_S <= 0 || LEASE_S > 600) {
  throw new RangeError(
    `Cannot run failover_time: --lease must be a number of seconds in (0, 600], got "${flags.lease}"`,
  );
}

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const REPO = new URL("..", import.meta.url).pathname;
const ADMIN = `llmgw_admin_bench_${crypto.randomUUID().replaceAll("-", "")}`;
const POLL_MS = 20;
/** A process start: `deno run` loading the project, opening the store, listening. */
const START_TIMEOUT_MS = 120_000;
/** A takeover: the lease running out, the next retry, and opening the books. */
const FAILOVER_TIMEOUT_MS = LEASE_S * 3_000 + 30_000;
/** One request; a hung one counts as "not yet". */
const REQUEST_TIMEOUT_MS = 2_000;
const DEPLOYMENT = {
  name: "demo",
  model: "org/demo",
  replicas: 1,
  profiles: [{ name: "h100", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 1 }],
};

/** What `GET /v1/leader` answers. */
interface Leadership {
  role: "leader" | "follower" | "read_only";
  holder: string;
  epoch: number;
  leader: string | null;
}

/** One `control serve` process, restartable on the same port and state directory. */
class Instance {
  readonly name: string;
  readonly url: string;
  readonly #args: string[];
  readonly #logPath: string;
  #child: Deno.ChildProcess | null = null;
  #drained: Promise<void> = Promise.resolve();

  constructor(name: string, storeUrl: string, root: string, port: number) {
    this.name = name;
    this.url = `http://127.0.0.1:${port}`;
    this.#logPath = join(root, `${name}.log`);
    this.#args = [
      "run",
      "-A",
      MAIN,
      "control",
      "serve",
      "--store",
      storeUrl,
      "--state-dir",
      join(root, name),
      "--listen",
      `127.0.0.1:${port}`,
      "--gateway-listen",
      "off",
      "--insecure-http",
      "--lease",
      String(LEASE_S),
    ];
  }

  /** Starts the process; its stdout and stderr go to its log file. */
  async start(): Promise<void> {
    if (this.#child !== null) throw new Error(`${this.name} is already running`);
    const log = await Deno.open(this.#logPath, { create: true, append: true });
    const child = new Deno.Command(Deno.execPath(), {
      args: this.#args,
      cwd: REPO,
      env: { LLMGW_ADMIN_TOKEN: ADMIN },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#child = child;
    const drain = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream) await log.write(chunk);
    };
    this.#drained = Promise.all([drain(child.stdout), drain(child.stderr)])
      .then(() => {}, () => {})
      .finally(() => log.close());
  }

  /** The pid, or null when not running. */
  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  /** Sends SIGKILL by pid, without waiting for the process to go. */
  kill(): void {
    if (this.#child === null) return;
    try {
      Deno.kill(this.#child.pid, "SIGKILL");
    } catch {
      // exited already
    }
  }

  /** Waits until the killed process is gone and reaped, and its output written. */
  async reap(): Promise<void> {
    if (this.#child === null) return;
    await this.#child.status;
    await this.#drained;
    this.#child = null;
  }

  /** Whether the process exited on its own (it failed). */
  async exited(): Promise<boolean> {
    if (this.#child === null) return true;
    const s = await Promise.race([
      this.#child.status,
      new Promise<null>((r) => setTimeout(r, 0, null)),
    ]);
    return s !== null;
  }

  /** The last lines of its log, for an error message. */
  logTail(lines = 15): string {
    try {
      const text = Deno.readTextFileSync(this.#logPath).trimEnd().split("\n");
      return text.slice(-lines).map((l) => `  ${this.name}: ${l}`).join("\n");
    } catch {
      return `  ${this.name}: (no log)`;
    }
  }
}

/** A free loopback port (bound, read and released), kept for an instance's restarts. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** `GET /v1/leader` on `url`, or null when it does not answer. */
async function leadershipOf(url: string): Promise<Leadership | null> {
  try {
    const res = await fetch(`${url}/v1/leader`, {
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (!res.ok) {
      await res.body?.cancel();
      return null;
    }
    return await res.json() as Leadership;
  } catch {
    return null;
  }
}

/** An admin request; null when no answer came (refused, reset, timed out). */
async function admin(url: string, path: string, body: unknown): Promise<Response | null> {
  try {
    return await fetch(url + path, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch {
    return null;
  }
}

/**
 * Calls `probe` every `intervalMs` until it answers non-null; bounded in
 * time and in count. A probe's throw is fatal (a wrong answer, not a "not
 * yet"), and so is `instances` exiting on their own.
 */
async function poll<T>(
  what: string,
  probe: () => Promise<T | null>,
  o: { timeoutMs: number; intervalMs: number; instances: Instance[] },
): Promise<T> {
  const deadline = performance.now() + o.timeoutMs;
  const maxProbes = Math.ceil(o.timeoutMs / o.intervalMs) + 1;
  for (let i = 0; i < maxProbes; i++) {
    const started = performance.now();
    const v = await probe();
    if (v !== null) return v;
    for (const inst of o.instances) {
      if (await inst.exited()) {
        throw new Error(
          `Cannot run failover_time: ${inst.name} exited while waiting for ${what}\n${inst.logTail()}`,
        );
      }
    }
    if (performance.now() >= deadline) break;
    const pause = o.intervalMs - (performance.now() - started);
    if (pause > 0) await new Promise((r) => setTimeout(r, pause));
  }
  throw new Error(
    `Cannot run failover_time: timed out after ${o.timeoutMs} ms waiting for ${what}\n${
      o.instances.map((i) => i.logTail()).join("\n")
    }`,
  );
}

/** Waits until `inst` answers with `role`. */
function untilRole(inst: Instance, role: Leadership["role"]): Promise<Leadership> {
  return poll(
    `${inst.name} to report role ${role}`,
    async () => {
      const l = await leadershipOf(inst.url);
      return l?.role === role ? l : null;
    },
    { timeoutMs: START_TIMEOUT_MS, intervalMs: 100, instances: [inst] },
  );
}

/** One kill: the two times from the kill (ms). */
async function failover(
  leader: Instance,
  survivor: Instance,
  epoch: number,
  replicas: number,
): Promise<{ electedMs: number; writeMs: number; epoch: number }> {
  leader.kill();
  const t0 = performance.now();
  const o = { timeoutMs: FAILOVER_TIMEOUT_MS, intervalMs: POLL_MS, instances: [survivor] };
  const [elected, writeMs] = await Promise.all([
    poll(`${survivor.name} to lead with an epoch above ${epoch}`, async () => {
      const l = await leadershipOf(survivor.url);
      return l?.role === "leader" && l.epoch > epoch ? { l, ms: performance.now() - t0 } : null;
    }, o),
    poll(`an admin write through ${survivor.name}`, async () => {
      const res = await admin(survivor.url, "/v1/deployments/demo/scale", { replicas });
      if (res === null) return null;
      const ms = performance.now() - t0;
      const text = await res.text();
      if (res.ok) return ms;
      // 503 not_leader / store_unavailable while no leader acts; anything else is a bug here.
      if (res.status >= 500) return null;
      throw new Error(`Cannot run failover_time: scale answered ${res.status}: ${text}`);
    }, o),
  ]);
  await leader.reap();
  return { electedMs: elected.ms, writeMs, epoch: elected.l.epoch };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** Runs the rounds; `instances` is filled for the caller to kill. */
async function main(pg: PostgresServer, root: string, instances: Instance[]): Promise<void> {
  const storeUrl = await pg.createDatabase("failover");
  instances.push(
    new Instance("a", storeUrl, root, freePort()),
    new Instance("b", storeUrl, root, freePort()),
  );
  // One at a time, so that the first leads and the second follows.
  await instances[0].start();
  await untilRole(instances[0], "leader");
  await instances[1].start();
  await untilRole(instances[1], "follower");
  const applied = await admin(instances[0].url, "/v1/deployments", DEPLOYMENT);
  const appliedText = await applied?.text();
  if (applied === null || !applied.ok) {
    throw new Error(
      `Cannot run failover_time: applying the deployment answered ${applied?.status}: ${appliedText}`,
    );
  }
  const elected: number[] = [];
  const written: number[] = [];
  for (let k = 1; k <= KILLS; k++) {
    const views = await Promise.all(instances.map((i) => leadershipOf(i.url)));
    const li = views.findIndex((v) => v?.role === "leader");
    if (li < 0 || views[1 - li]?.role !== "follower") {
      throw new Error(
        `Cannot run failover_time: want one leader and one follower before kill ${k}, got ${
          JSON.stringify(views)
        }`,
      );
    }
    const [leader, survivor] = [instances[li], instances[1 - li]];
    const r = await failover(leader, survivor, views[li]!.epoch, k % 2 === 1 ? 2 : 1);
    elected.push(r.electedMs);
    written.push(r.writeMs);
    console.error(
      `kill ${k}/${KILLS}: ${leader.name} killed; ${survivor.name} leads epoch ${r.epoch} after ${
        secs(r.electedMs)
      }, a write succeeded after ${secs(r.writeMs)}`,
    );
    await leader.start();
    await untilRole(leader, "follower");
  }
  console.log(
    "| lease | leader kills | new leader: median | new leader: max | admin write: median | admin write: max |",
  );
  console.log("| --- | --- | --- | --- | --- | --- |");
  console.log(
    `| ${LEASE_S} s | ${KILLS} | ${secs(median(elected))} | ${secs(Math.max(...elected))} | ${
      secs(median(written))
    } | ${secs(Math.max(...written))} |`,
  );
}

const root = await Deno.makeTempDir({ prefix: "llmgw-failover-" });
const instances: Instance[] = [];
let pg: PostgresServer | null = null;
/** Kills the instances by pid; the caller stops the database and removes `root`. */
const killAll = async () => {
  for (const i of instances) {
    i.kill();
    await i.reap();
  }
};
// A signal skips `finally`. Instead, the instances are killed here, the wait
// under way fails on their exit, and the `finally` below cleans up as usual.
let interrupted: string | null = null;
const onSignal = (signal: Deno.Signal) => () => {
  interrupted = signal;
  void killAll();
};
const onInt = onSignal("SIGINT");
const onTerm = onSignal("SIGTERM");
Deno.addSignalListener("SIGINT", onInt);
Deno.addSignalListener("SIGTERM", onTerm);
try {
  pg = await startPostgres();
  if (interrupted === null) await main(pg, root, instances);
} catch (e) {
  if (interrupted === null) throw e;
} finally {
  await killAll();
  await pg?.stop();
  await Deno.remove(root, { recursive: true }).catch(() => {});
  Deno.removeSignalListener("SIGINT", onInt);
  Deno.removeSignalListener("SIGTERM", onTerm);
}
if (interrupted !== null) {
  console.error(`failover_time: stopped by ${interrupted}; every process it started is gone`);
  Deno.exit(130);
}
