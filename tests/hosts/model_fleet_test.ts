/**
 * A model fetched once per fleet, end to end across hosts (issue #25, "Test
 * material", second bullet): the fake hub and a control plane (HTTPS, its own
 * CA) each in a network namespace, four agents (real `llmgw agent run`
 * processes on the simulated DGX H100 of dev/machines, node certificates from
 * joining, the fake engine first on their PATH, a model cache each) in four
 * more, every host's link shaped with `tbf` at {@link RATE}. One synthetic
 * model of {@link SHARDS} safetensors shards ({@link WEIGHT_BYTES} of
 * weights), one deployment with a replica on every agent. Checked:
 *
 * - the hub sent at most 1.02 × the model's bytes (its own counters) and
 *   every replica is ready;
 * - every file on every host hashes to what the revision API says;
 * - no partial file ever under its final name: each host's blobs/ is
 *   sampled every 300 ms while the model moves, each final-named blob must
 *   have its full size and hash (model_fleet_checks.ts), and no part file is
 *   left at the end;
 * - an agent others fetch from is SIGKILLed while they fetch: the others
 *   complete (the control plane re-plans; the peer source fails over), and
 *   restarted on its state it resumes and gets ready;
 * - the hub switched off, a fifth agent joined, a second deployment of the
 *   same commit under another served name: every replica starts, the hub
 *   counts no request more, and only llmgw's own clients ever asked it
 *   (engines never did: counted by User-Agent), and every engine runs
 *   with `HF_HUB_OFFLINE=1`, no token, from its agent's snapshot path;
 * - warm placement: the second deployment's replicas land on the four
 *   holders, not on the fifth agent, and their explanations say so.
 *
 * The lab stops every process by pid and deletes every namespace and veth,
 * on failure too. Ignored, with the reason, where network namespaces are
 * unavailable (not root, no `ip`).
 */
import { join } from "node:path";
import { assertEquals, assertOk } from "../assert.ts";
import { until } from "../until.ts";
import { Lab, type LabHost, type LabProcess, netnsAvailable } from "./lab.ts";
import { enginesIn, environOf, REPO } from "./rehearsal_hosts.ts";
import { logTails, waitForLog } from "./rehearsal_waits.ts";
import { HUB_PORT } from "./model_fleet_hub.ts";
import { blobHash, BlobSampler, type RevisionFile, revisionFiles } from "./model_fleet_checks.ts";
import { errorMessage } from "../../text/error_message.ts";

const netns = await netnsAvailable();
const ignore = !netns.ok;
if (!netns.ok) console.warn(`tests/hosts/model_fleet_test.ts ignored: ${netns.reason}`);

const DENO = Deno.execPath();
const MAIN = join(REPO, "main.ts");
const MACHINE = join(REPO, "dev/machines/dgx_h100_idle/agent.json");
/** Every host's link, each way out of its namespace: 128 MiB takes 10.7 s at this rate. */
const RATE = "100mbit";
const MODEL = "fleet/model-128m";
const SHARDS = 4;
const WEIGHT_BYTES = 128 * 2 ** 20;
const AGENTS = ["n1", "n2", "n3", "n4"];
const WAIT = { timeoutMs: 120_000, intervalMs: 300 };
const ENGINE = {
  FAKE_ENGINE_DENO: DENO,
  FAKE_ENGINE_LOAD_SECONDS: "0.3",
  FAKE_ENGINE_ACCESS_LOG: "0",
};

type Json = Record<string, unknown>;
interface Replica {
  id: string;
  deployment: string;
  state: string;
  shards: { node: string; download: { sources: string[]; bytes_done: number } | null }[];
  explanation: { summary: string } | null;
}
interface Counters {
  byKind: Record<string, { requests: number; bytes: number }>;
  byCaller: Record<string, { requests: number; bytes: number }>;
  totalBytes: number;
}

Deno.test({
  name:
    "model fleet: four agents in namespaces fetch one model once, a source killed mid-way, then a second deployment with the hub off lands on the holders",
  ignore,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "llmgw_model_fleet_" });
    let ok = false;
    try {
      await using lab = await Lab.create({ name: "fleet" });
      try {
        await fleet(lab, dir);
        ok = true;
      } catch (e) {
        throw new Error(`${errorMessage(e)}\n${await logTails(dir)}`, { cause: e });
      }
    } finally {
      if (ok) await Deno.remove(dir, { recursive: true });
      else console.error(`model fleet: caches and logs kept in ${dir}`);
    }
  },
});

async function shaped(lab: Lab, name: string): Promise<LabHost> {
  const host = await lab.host(name);
  const r = await host.run("tc", [
    ...["qdisc", "add", "dev", host.ifname.mgmt, "root", "tbf"],
    ...["rate", RATE, "burst", "256kb", "latency", "50ms"],
  ]);
  assertOk(r.success, r.stderr);
  return host;
}

async function fleet(lab: Lab, dir: string): Promise<void> {
  const hubHost = await shaped(lab, "hub");
  const cpHost = await shaped(lab, "cp");
  const hosts = new Map<string, LabHost>();
  for (const n of [...AGENTS, "n5"]) hosts.set(n, await shaped(lab, n));
  const hubDir = join(dir, "hub");
  await Deno.mkdir(hubDir);
  const hub = await hubHost.spawn(DENO, [
    ...["run", "-A", "--quiet", join(REPO, "tests/hosts/model_fleet_hub.ts")],
    ...[hubDir, hubHost.address(), MODEL, String(SHARDS), String(WEIGHT_BYTES)],
  ], { log: join(hubDir, "hub.log") });
  await waitForLog(hub, '"fake_hub":"listening"', "the fake hub");
  const endpoint = `http://${hubHost.address()}:${HUB_PORT}`;
  const { commit, files } = revisionFiles(
    JSON.parse(await Deno.readTextFile(join(hubDir, "revision.json"))),
  );
  const modelBytes = files.reduce((n, f) => n + f.size, 0);
  assertOk(files.filter((f) => f.path.endsWith(".safetensors")).length === SHARDS);

  // The control plane: HTTPS from its own CA, quick liveness; lost late, so the killed agent's
  // replica waits for it rather than moving.
  const store = join(dir, "cp", "state");
  await Deno.mkdir(join(dir, "cp"));
  const cpUrl = `https://${cpHost.address()}:7070`;
  const control = await cpHost.spawn(DENO, [
    ...["run", "-A", MAIN, "control", "serve", "--store", store],
    ...["--listen", `${cpHost.address()}:7070`, "--tls-san", cpHost.address()],
    ...["--heartbeat-interval", "0.5", "--unreachable-after", "4", "--lost-after", "600"],
    ...["--gateway-listen", "off"],
  ], { env: { HF_ENDPOINT: endpoint }, log: join(dir, "cp", "control.log") });
  await waitForLog(control, "listening on", "the control plane");
  const api = controlApi(cpHost, cpUrl, store, dir);
  const join_ = await api("POST", "/v1/tokens", { kind: "join" });
  const joinToken = String(join_.token);

  const agents = new Map<string, LabProcess>();
  const startAgent = async (n: string) => {
    const h = hosts.get(n)!;
    const home = join(dir, n);
    await Deno.mkdir(home, { recursive: true });
    agents.set(
      n,
      await h.spawn(DENO, [
        ...["run", "-A", MAIN, "agent", "run", "--control", cpUrl, "--node-id", n],
        ...["--state-dir", join(home, "state"), "--config", MACHINE],
        ...["--mgmt-addr", h.address(), "--mgmt-interface", h.ifname.mgmt],
        ...["--listen", `${h.address()}:7071`, "--proxy-listen", `${h.address()}:7072`],
        ...["--ports", "20000-20199", "--model-cache", join(home, "cache")],
      ], {
        env: {
          ...ENGINE,
          LLMGW_JOIN_TOKEN: joinToken,
          HF_ENDPOINT: endpoint,
          PATH: `${join(REPO, "dev/fake_engine/bin")}:${Deno.env.get("PATH")}`,
        },
        log: join(home, "agent.log"),
      }),
    );
  };
  for (const n of AGENTS) await startAgent(n);
  await until("four nodes ready", async () => {
    const nodes = (await api("GET", "/v1/nodes")).nodes as { id: string; state: string }[];
    return nodes.filter((n) => n.state === "ready").length === AGENTS.length;
  }, WAIT);

  const base = await counters(hubDir);
  const blobDirs = new Map(
    AGENTS.map((n) => [n, join(dir, n, "cache", `models--${MODEL.replace("/", "--")}`, "blobs")]),
  );
  const sampler = new BlobSampler(files, blobDirs);
  let sampling = true;
  let victim = "";
  const samples = (async () => {
    // Bounded: it ends when the first deployment is ready or the test fails below.
    while (sampling) {
      await sampler.sample();
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
  try {
    await api("POST", "/v1/deployments", {
      name: "fleet-a",
      model: MODEL,
      served_model_name: "fleet-a",
      replicas: AGENTS.length,
      placement: "spread",
      profiles: [{ name: "h100", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 1 }],
    });
    const placed = await until("a replica of fleet-a on every agent", async () => {
      const rs = await replicas(api, "fleet-a");
      const nodes = new Set(rs.flatMap((r) => r.shards.map((s) => s.node)));
      return nodes.size === AGENTS.length ? rs : null;
    }, WAIT);

    // An agent that another fetches from, while both fetch, dies by SIGKILL.
    victim = await until("an agent serving another mid-download", async () => {
      const shards = (await replicas(api, "fleet-a")).flatMap((r) => r.shards);
      const fetching = shards.filter((s) => s.download !== null && s.download.bytes_done > 0);
      for (const s of fetching) {
        const feeds = fetching.some((o) => o.download!.sources.includes(`peer ${s.node}`));
        if (feeds && s.download!.sources.every((src) => src.startsWith("peer "))) return s.node;
      }
      return null;
    }, { timeoutMs: 60_000, intervalMs: 100 });
    agents.get(victim)!.kill("SIGKILL");
    await agents.get(victim)!.status;
    const survivors = AGENTS.filter((n) => n !== victim);
    await until(`fleet-a ready on ${survivors.join(", ")} with ${victim} dead`, async () => {
      const rs = await replicas(api, "fleet-a");
      const ready = rs.filter((r) => r.state === "ready").flatMap((r) => r.shards[0].node);
      return survivors.every((n) => ready.includes(n));
    }, WAIT);
    // A follower of the victim moved its ranges to its next source (the agent's own log line).
    const movedOff = await Promise.all(
      survivors.map(async (n) =>
        (await agents.get(n)!.readLog()).split("\n").some((l) =>
          l.includes('"model download: source_changed"') && l.includes(`"from":"peer ${victim}"`)
        )
      ),
    );
    assertOk(movedOff.some(Boolean), `no agent moved off peer ${victim} after its kill`);
    // Back on its state directory: it resumes its download and its replica gets ready.
    await startAgent(victim);
    await until("every replica of fleet-a ready", async () => {
      const rs = await replicas(api, "fleet-a");
      return rs.length === placed.length && rs.every((r) => r.state === "ready");
    }, WAIT);
  } finally {
    sampling = false;
    await samples;
  }
  await sampler.sample();
  assertEquals(sampler.problems, [], "no partial file under a final name");
  assertOk(sampler.rounds > 5, `blobs/ sampled ${sampler.rounds} times during the transfer`);

  const moved = (await counters(hubDir)).totalBytes - base.totalBytes;
  assertOk(
    moved <= 1.02 * modelBytes,
    `the hub sent ${moved} bytes for a ${modelBytes}-byte model (${
      (moved / modelBytes).toFixed(3)
    }x)`,
  );
  for (const n of AGENTS) await checkSnapshot(dir, n, commit, files, sampler.hashed);
  const figures = [
    `${modelBytes} bytes in ${files.length} files at ${RATE}`,
    `origin ${(moved / modelBytes).toFixed(4)}x`,
    `${victim} killed`,
    `blobs/ sampled ${sampler.rounds} times, ${sampler.hashed.size} final blobs hashed`,
  ];

  // The hub off, a fifth agent that holds nothing, the same commit under another name.
  await Deno.writeTextFile(join(hubDir, "offline"), "");
  await until("the hub switched off", () => exists(join(hubDir, "offline.done")), WAIT);
  const off = await counters(hubDir);
  await startAgent("n5");
  await until("n5 ready", async () => {
    const nodes = (await api("GET", "/v1/nodes")).nodes as { id: string; state: string }[];
    return nodes.some((n) => n.id === "n5" && n.state === "ready");
  }, WAIT);
  await api("POST", "/v1/deployments", {
    name: "fleet-b",
    model: MODEL,
    revision: commit,
    served_model_name: "fleet-b",
    replicas: AGENTS.length,
    placement: "spread",
    profiles: [{ name: "h100", engine: "vllm", gpu_class: "h100-80g", tensor_parallel: 1 }],
  });
  const warm = await until("every replica of fleet-b ready", async () => {
    const rs = await replicas(api, "fleet-b");
    return rs.length === AGENTS.length && rs.every((r) => r.state === "ready") ? rs : null;
  }, WAIT);
  // Every engine (two per holder now) runs offline from its agent's snapshot, with no token.
  for (const n of AGENTS) {
    const engines = enginesIn(join(dir, n, "state"));
    assertEquals(engines.length, 2, `${n}: engines ${JSON.stringify(engines)}`);
    for (const e of engines) {
      const env = environOf(e.pid);
      assertEquals([env.HF_HUB_OFFLINE, env.HF_TOKEN], ["1", undefined], `${n}: ${e.shard}`);
      const argv = Deno.readTextFileSync(`/proc/${e.pid}/cmdline`).split("\0");
      const snapshot = join(dir, n, "cache", `models--${MODEL.replace("/", "--")}`, "snapshots");
      assertOk(argv.includes(join(snapshot, commit)), `${n}: ${e.shard} runs ${argv.join(" ")}`);
    }
  }
  const after = await counters(hubDir);
  assertEquals(after.byKind, off.byKind, "no request reached the hub while it was off");
  const callers = Object.keys(after.byCaller).sort();
  const strangers = callers.filter((c) => !c.startsWith("llmgw") && c !== "model_fleet_test");
  assertEquals(strangers, [], `only llmgw's clients asked the hub (callers: ${callers})`);
  console.log(
    `model fleet: ${figures.join("; ")}; fleet-b on ${warm.map((r) => r.shards[0].node)}`,
  );
  for (const r of warm) {
    for (const s of r.shards) assertOk(AGENTS.includes(s.node), `${r.id} on ${s.node}`);
    const summary = r.explanation?.summary ?? "";
    assertOk(
      summary.includes(`${MODEL}@${commit.slice(0, 7)}`) && /\bholds?\b/.test(summary),
      `${r.id}'s explanation names the holders: ${summary}`,
    );
  }
}

/** Every file of the revision in `n`'s snapshot, hashing to its blob name; no part file left. */
async function checkSnapshot(
  dir: string,
  n: string,
  commit: string,
  files: readonly RevisionFile[],
  hashed: ReadonlyMap<string, string>,
): Promise<void> {
  const repoDir = join(dir, n, "cache", `models--${MODEL.replace("/", "--")}`);
  for (const f of files) {
    const path = await Deno.realPath(join(repoDir, "snapshots", commit, f.path));
    const got = hashed.get(path) ?? await blobHash(path, f.lfs, f.size);
    assertEquals(got, f.blob, `${n}: ${f.path}`);
  }
  const left = [...Deno.readDirSync(join(repoDir, "blobs"))].map((e) => e.name)
    .filter((name) => name.includes(".llmgw."));
  assertEquals(left, [], `${n}: part files left`);
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

async function counters(hubDir: string): Promise<Counters> {
  return JSON.parse(await Deno.readTextFile(join(hubDir, "counters.json")));
}

async function replicas(api: Api, deployment: string): Promise<Replica[]> {
  const rs = (await api("GET", "/v1/replicas")).replicas as Replica[];
  return rs.filter((r) => r.deployment === deployment);
}

type Api = (method: string, path: string, body?: unknown) => Promise<Json>;

/** The admin API through curl on the control host (the lab is not reachable from here). */
function controlApi(cp: LabHost, url: string, store: string, dir: string): Api {
  const header = join(dir, "cp", "admin.header");
  const token = Deno.readTextFileSync(join(store, "admin.token")).trim();
  Deno.writeTextFileSync(header, `authorization: Bearer ${token}\n`, { mode: 0o600 });
  let calls = 0;
  return async (method, path, body) => {
    const args = ["-sS", "--max-time", "10", "--cacert", join(store, "tls/ca.crt")];
    args.push("-H", `@${header}`, "-X", method, "-w", "\n%{http_code}");
    if (body !== undefined) {
      const file = join(dir, "cp", `body_${calls++}.json`);
      await Deno.writeTextFile(file, JSON.stringify(body));
      args.push("-H", "content-type: application/json", "--data-binary", `@${file}`);
    }
    const r = await cp.run("curl", [...args, `${url}${path}`], { timeoutMs: 15_000 });
    const [text, code] = [
      r.stdout.slice(0, r.stdout.lastIndexOf("\n")),
      r.stdout.split("\n").pop(),
    ];
    if (!r.success || !code?.startsWith("2")) {
      throw new Error(`${method} ${path}: ${code} ${text} ${r.stderr.trim()}`);
    }
    return JSON.parse(text) as Json;
  };
}
