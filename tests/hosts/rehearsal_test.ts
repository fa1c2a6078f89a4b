/**
 * The multi-host rehearsal (issue #14): docs/deploy.md followed literally on
 * seven lab hosts, one network namespace each (lab.ts): control, agent-a,
 * agent-b, agent-c, gateway, client, prometheus; and an eighth, hub, the
 * fleet's mirror of the hub (issue #25): the fake hub (dev/fake_hub) serving
 * a small synthetic model under the deployment's id, with the real model's
 * config.json and claimed size, gated as the real repo is, to one account
 * token the operator keeps in hf.token. agent-a and agent-b are
 * 8×H100 machines (recorded-derived fixtures, dev/machines) wired to a
 * second network standing for their fabric and naming the same fabric in
 * their agent config; agent-c is an 8×A100 machine on no fabric.
 *
 * Every `sh` block of the page runs as written on the hosts it names, each
 * host's ROOT a directory of its own; `systemctl enable --now` runs the
 * installed unit's ExecStart (rehearsal_hosts.ts, systemd_unit.ts). What the
 * rehearsal adds, and nothing more: the fake engine first on the GPU hosts'
 * PATH in place of vLLM, short liveness thresholds merged into control.json
 * after `control init` wrote it, and its own checks and faults between steps:
 *
 * - placement across namespaces, each shard's NCCL_SOCKET_IFNAME and
 *   GLOO_SOCKET_IFNAME its own host's management interface (read from the
 *   engine's /proc/PID/environ);
 * - each engine runs from its agent's snapshot of the model (its argv) with
 *   HF_HUB_OFFLINE=1 and no hub token (its environ): the agents fetched the
 *   weights from the mirror the page points them at;
 * - TLS on every hop: plain HTTP and a client trusting another CA fail on
 *   the control plane, both agent listeners and the gateway;
 * - client traffic through the gateway with no failed request while the
 *   model is ready, across a flapping agent link (no rebuild, same pids) and
 *   the control host cut off until the gateway has noticed (it keeps
 *   routing, agents keep their engines, all reconciles);
 * - agent-b's link down: unreachable, lost, the replica rebuilt on agent-c
 *   from its second profile; when the link returns agent-b's old shard is
 *   stopped and only agent-c's copy is published.
 *
 * No engine is restarted except the rebuilt replica's, by pid. The lab
 * removes every namespace, link and process, on failure too; the host
 * directories are removed afterwards. Ignored, with the reason, where
 * network namespaces are unavailable (not root, no `ip`).
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "../assert.ts";
import { groupMembers } from "../../supervisor/proc.ts";
import { until } from "../until.ts";
import { Lab, type LabProcess, netnsAvailable } from "./lab.ts";
import {
  addDefaultRoute,
  bundleRoles,
  type EngineProcess,
  enginesIn,
  environOf,
  hostDirs,
  Rehearsal,
  RehearsalHost,
  REPO,
} from "./rehearsal_hosts.ts";
import { runBounded } from "./bounded_command.ts";
import { finished, firstAnswer, logTails, WAIT, waitForLog } from "./rehearsal_waits.ts";
import { errorMessage } from "../../text/error_message.ts";

const netns = await netnsAvailable();
const ignore = !netns.ok;
if (!netns.ok) console.warn(`tests/hosts/rehearsal_test.ts ignored: ${netns.reason}`);

const DOC = join(REPO, "docs/deploy.md");
const CLIENT = join(REPO, "tests/hosts/rehearsal_client.ts");
const SIM = join(REPO, "dev/machines");
const H100_FABRIC = {
  "ib-compute": ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"],
};
const MODEL = "llama-70b";
/** The deployment's model, as docs/deploy.md names it. */
const HUB_MODEL = "meta-llama/Llama-3.1-70B-Instruct";
/** As the real repo: Llama 3.1 70B's claimed size, gated (the tokens of FAKE_HUB_TOKENS granted). */
const GATED = "claim=real,gated";
/** The mirror's port (its CDN's is the next one): in its own namespace, so no port plan. */
const HUB_PORT = 8000;

/**
 * Liveness for the rehearsal (control.json keys, seconds). The control host
 * stays cut off until the gateway's poll has failed (its 2 s interval plus
 * its 5 s timeout) and agents then need a heartbeat or two through TCP's
 * retransmission backoff: unreachable_after leaves room for both.
 */
const LIVENESS = { heartbeat_interval: 0.5, unreachable_after: 15, lost_after: 20 };
/** What the GPU hosts have in place of vLLM: the fake engine, loading quickly. */
const ENGINE_STAND_IN = {
  FAKE_ENGINE_DENO: Deno.execPath(),
  FAKE_ENGINE_LOAD_SECONDS: "0.5",
  FAKE_ENGINE_ACCESS_LOG: "0",
};
/** A JSON answer of the admin API. */
type Json = Record<string, unknown>;
/** GET of the admin API on the control host. */
type Api = (path: string) => Promise<Json>;

interface ReplicaJson {
  id: string;
  state: string;
  profile: string | null;
  shards: { shard_id: string; rank: number; node: string }[];
}

interface NodeJson {
  id: string;
  state: string;
  mgmt_interface?: string | null;
  mgmt_addr: string;
  last_seen_ms: number;
}

Deno.test({
  name:
    "rehearsal: docs/deploy.md on seven hosts, TLS on every hop, a flapping link, the control host cut off, a GPU host lost",
  ignore,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "llmgw_rehearsal_" });
    let ok = false;
    try {
      const dist = join(dir, "dist");
      await bundleRoles(dist);
      await using lab = await Lab.create({ name: "rehearsal" });
      try {
        await rehearse(lab, dir, dist);
        ok = true;
      } catch (e) {
        throw new Error(`${errorMessage(e)}\n${await logTails(dir)}`, {
          cause: e,
        });
      }
    } finally {
      // Kept when it failed: the hosts' roots and service logs are the post-mortem.
      if (ok) await Deno.remove(dir, { recursive: true });
      else console.error(`rehearsal: host directories and logs kept in ${dir}`);
    }
  },
});

/** The cluster docs/deploy.md built, and what the faults need of it. */
interface Cluster {
  lab: Lab;
  book: Rehearsal;
  api: Api;
  control: RehearsalHost;
  /** agent-a, agent-b, agent-c. */
  agents: RehearsalHost[];
  gateway: RehearsalHost;
  /** The replica as first placed, on agent-a and agent-b. */
  placed: ReplicaJson;
  /** Starts COUNT chat completions from the client host, one every INTERVAL_MS. */
  burst: (count: number, intervalMs: number) => Promise<LabProcess>;
  /** Each agent's engines, in the order of `agents`. */
  engines: () => EngineProcess[][];
  /** How many node-unreachable, node-lost and rebuild events there are. */
  incidents: () => Promise<number>;
}

async function rehearse(lab: Lab, dir: string, dist: string): Promise<void> {
  const k = await followTheDoc(lab, dir, dist);
  const steady = await finished(await k.burst(10, 50));
  assertEquals([steady.ok, steady.failed], [10, 0], `steady traffic: ${steady.lines}`);
  await flappingLink(k);
  await controlCutOff(k);
  await hostLost(k);
}

/** Builds the lab's hosts and runs every step of docs/deploy.md on them, checking as it goes. */
async function followTheDoc(lab: Lab, dir: string, dist: string): Promise<Cluster> {
  const machine = (name: string, fabric: boolean) => ({
    NVIDIA_SMI: join(SIM, name, "nvidia-smi"),
    SYSFS_ROOT: join(SIM, name, "sysfs"),
    FABRICS: JSON.stringify(fabric ? H100_FABRIC : {}),
  });
  const plan = [
    { name: "control", role: "control" },
    { name: "agent-a", role: "gpu", fabric: true, vars: machine("dgx_h100_idle", true) },
    { name: "agent-b", role: "gpu", fabric: true, vars: machine("dgx_h100_idle", true) },
    { name: "agent-c", role: "gpu", vars: machine("hgx_a100_40g", false) },
    { name: "gateway", role: "gateway" },
    { name: "client", role: "client" },
    { name: "prometheus", role: "prometheus" },
  ] as const;
  const hosts: RehearsalHost[] = [];
  for (const p of plan) {
    const labHost = await lab.host(p.name, { networks: "fabric" in p ? ["fabric"] : [] });
    await addDefaultRoute(labHost);
    const { root, work } = await hostDirs(dir, p.name);
    hosts.push(
      new RehearsalHost(
        labHost,
        p.role,
        root,
        work,
        "vars" in p ? p.vars : {},
        p.role === "gpu" ? [join(REPO, "dev/fake_engine/bin")] : [],
      ),
    );
  }
  const hub = await startMirror(lab, dir);
  const byName = (n: string) => hosts.find((h) => h.name === n)!;
  const control = byName("control");
  const agents = ["agent-a", "agent-b", "agent-c"].map(byName);
  const gateway = byName("gateway");
  const client = byName("client");
  const book = new Rehearsal(await Deno.readTextFile(DOC), "docs/deploy.md", hosts, {
    CONTROL_HOST: control.address,
    GATEWAY_HOST: gateway.address,
    GPU_HOSTS: agents.map((h) => h.address).join(" "),
    LLMGW_SRC: REPO,
    DIST: dist,
    HF_ENDPOINT: hub.endpoint,
  });
  const controlState = join(control.root, "var/lib/llmgw/control");

  await book.step("install-control");
  await book.step("install-agent");
  await book.step("install-gateway");
  for (const out of await book.step("engine")) {
    assertStringIncludes(out.stdout, "0.11.1", `${out.host}: vllm --version (the stand-in)`);
  }
  const [init] = await book.step("control-init");
  const caHash = /key hash sha256:([0-9a-f]{64})/.exec(init.stdout)?.[1];
  assertOk(caHash !== undefined, `control init prints the CA key hash: ${init.stdout}`);
  assertEquals(
    (await Deno.stat(join(controlState, "admin.token"))).mode! & 0o777,
    0o600,
    "the first admin token is its owner's only",
  );
  // The rehearsal's one change to a file the page wrote: faults in seconds, not minutes.
  const configPath = join(control.root, "etc/llmgw/control.json");
  const config = JSON.parse(await Deno.readTextFile(configPath));
  assertEquals([config.store, config.tls_san], [controlState, [control.address]]);
  await Deno.writeTextFile(configPath, JSON.stringify({ ...config, ...LIVENESS }, null, 2));
  // The operator's hub token, which the page asks them to put in hf.token.
  await Deno.writeTextFile(join(control.work, "hf.token"), hub.token + "\n", { mode: 0o600 });
  await book.step("control-hub");
  await book.step("control-start");
  await waitForLog(control.service("llmgw-control.service"), "listening on", "the control plane");
  await book.step("control-check");

  const [tokens] = await book.step("tokens");
  const joinToken = (await Deno.readTextFile(join(control.work, "join.token"))).trim();
  assertOk(joinToken.endsWith(`.${caHash}`), "the join token carries the CA key hash");
  assertOk(!tokens.stdout.includes(joinToken), "tokens list shows no secret");
  const api = controlApi(
    control,
    join(controlState, "tls/ca.crt"),
    join(controlState, "admin.token"),
  );

  await book.step("join-token");
  for (const out of await book.step("agent-config")) {
    const onFabric = out.host !== "agent-c";
    assertEquals(out.stdout.includes("ib-compute"), onFabric, `${out.host}: fabric in inventory`);
  }
  await book.step("agent-start", { standIns: ENGINE_STAND_IN });
  const nodes = await until("three nodes ready", async () => {
    const ns = (await api("/v1/nodes")).nodes as NodeJson[];
    return ns.length === 3 && ns.every((n) => n.state === "ready") ? ns : null;
  }, WAIT);
  for (const h of agents) {
    const n = nodes.find((n) => n.id === h.name);
    assertOk(n !== undefined, `node ${h.name} registered under its host name`);
    assertEquals([n.mgmt_addr, n.mgmt_interface], [h.address, h.lab.ifname.mgmt]);
  }
  const [listed] = await book.step("nodes");
  for (const h of agents) assertStringIncludes(listed.stdout, h.name);

  await book.step("gateway-key");
  await book.step("gateway-csr");
  await book.step("gateway-cert");
  await book.step("gateway-files");
  await book.step("gateway-config");
  await book.step("gateway-start");
  await waitForLog(gateway.service("llmgw-gateway.service"), "listening on", "the gateway");

  await book.step("deployment");
  const placed = await until("the two-node replica ready", async () => {
    const r = await theReplica(api);
    return r?.state === "ready" ? r : null;
  }, WAIT);
  assertEquals(placed.profile, "h100-two-nodes");
  assertEquals(placed.shards.map((s) => s.node).sort(), ["agent-a", "agent-b"]);
  const [checked] = await book.step("check-replicas");
  assertStringIncludes(checked.stdout, placed.id);
  assertStringIncludes(checked.stdout, "ready");
  await assertShardInterfaces(placed, agents);
  assertOfflineFromSnapshot(placed, agents);

  await book.step("client-files");
  const burst = (count: number, intervalMs: number) =>
    client.lab.spawn(
      "env",
      client.command(book.shellEnv(client), [
        Deno.execPath(),
        "run",
        "--allow-net",
        "--allow-read",
        "--no-config",
        CLIENT,
        "chat",
        `https://${gateway.address}:8443/v1/chat/completions`,
        join(client.work, "ca.crt"),
        join(client.work, "api.key"),
        MODEL,
        String(count),
        String(intervalMs),
        "10000",
      ]),
      { cwd: client.work },
    );
  await gatewayRoutes(burst);
  const [chat] = await book.step("chat");
  assertStringIncludes(chat.stdout, '"choices"');

  await assertTlsEverywhere(book, client, control, agents, gateway);

  await book.step("prometheus-files");
  const promtool = await runBounded("sh", ["-c", "command -v promtool"]);
  await book.step("scrape-config", {
    skip: promtool.success ? undefined : "promtool is not installed",
  });
  const [scraped] = await book.step("scrape-check");
  assertEquals(scraped.stdout.trim().split("\n").length, 4, "control and three agents");
  book.finish();

  return {
    lab,
    book,
    api,
    control,
    agents,
    gateway,
    placed,
    burst,
    engines: () => agents.map((h) => enginesIn(join(h.root, "var/lib/llmgw/agent"))),
    incidents: async () =>
      ((await api("/v1/events?limit=500")).events as { kind: string }[])
        .filter((e) => /unreachable|lost|rebuild/.test(e.kind)).length,
  };
}

/**
 * Each shard's engine bootstraps NCCL and Gloo over its own host's
 * management interface: the variables name it (read from the engine's
 * /proc/PID/environ), and in that host's namespace it holds the host's
 * management address.
 */
async function assertShardInterfaces(placed: ReplicaJson, agents: RehearsalHost[]) {
  for (const s of placed.shards) {
    const host = agents.find((h) => h.name === s.node)!;
    const engines = enginesIn(join(host.root, "var/lib/llmgw/agent"));
    assertEquals(engines.map((e) => e.shard), [s.shard_id], `${s.node} runs shard ${s.shard_id}`);
    const env = environOf(engines[0].pid);
    const ifname = host.lab.ifname.mgmt;
    assertEquals(
      [env.NCCL_SOCKET_IFNAME, env.GLOO_SOCKET_IFNAME],
      [`=${ifname}`, ifname],
      `rank ${s.rank} on ${s.node}`,
    );
    assertStringIncludes(env.NCCL_IB_HCA ?? "", "=mlx5_0:1");
    const shown = await host.lab.run("ip", ["-j", "-4", "addr", "show", "dev", ifname]);
    assertOk(shown.success, shown.stderr);
    const addrs = (JSON.parse(shown.stdout) as { addr_info: { local: string }[] }[])
      .flatMap((l) => l.addr_info.map((i) => i.local));
    assertEquals(addrs, [host.address], `${ifname} on ${s.node} holds its management address`);
  }
  assertEquals(enginesIn(join(agents[2].root, "var/lib/llmgw/agent")), [], "agent-c runs nothing");
}

/**
 * Starts the fleet's mirror on its own lab host: the fake hub serving
 * {@link HUB_MODEL} (Llama 3.1 70B's config.json and claimed size, 4 small
 * shards), gated, granted to one account token (given in the environment,
 * never argv).
 */
async function startMirror(lab: Lab, dir: string): Promise<{ endpoint: string; token: string }> {
  const host = await lab.host("hub");
  const token = `hf_${crypto.randomUUID().replaceAll("-", "")}`;
  const hub = await host.spawn(Deno.execPath(), [
    ...["run", "-A", "--quiet", "--no-config", join(REPO, "dev/fake_hub/fake_hub.ts")],
    ...["--host", host.address(), "--port", String(HUB_PORT), "--cdn-port", String(HUB_PORT + 1)],
    ...["--synthetic", `${HUB_MODEL},preset=llama-3.1-70b-instruct,shards=4,bytes=4MiB,${GATED}`],
  ], {
    env: { FAKE_HUB_TOKENS: token },
    log: join(dir, "hub.log"),
  });
  await waitForLog(hub, '"fake_hub":"listening"', "the fleet's mirror (the fake hub)");
  return { endpoint: `http://${host.address()}:${HUB_PORT}`, token };
}

/**
 * Every engine of the replica runs from its agent's snapshot of the model
 * (the argv names MODEL_CACHE/models--org--name/snapshots/COMMIT, which
 * holds the model's config.json), offline and with no hub token.
 */
function assertOfflineFromSnapshot(placed: ReplicaJson, agents: RehearsalHost[]): void {
  const snapshots = join(
    "var/lib/llmgw/agent/models",
    `models--${HUB_MODEL.replace("/", "--")}`,
    "snapshots",
  );
  for (const s of placed.shards) {
    const host = agents.find((h) => h.name === s.node)!;
    const [engine] = enginesIn(join(host.root, "var/lib/llmgw/agent"));
    const env = environOf(engine.pid);
    assertEquals(
      [env.HF_HUB_OFFLINE, env.HF_TOKEN],
      ["1", undefined],
      `${s.node}: the engine's hub settings`,
    );
    const argv = Deno.readTextFileSync(`/proc/${engine.pid}/cmdline`).split("\0");
    const prefix = join(host.root, snapshots) + "/";
    const snapshot = argv.find((a) => a.startsWith(prefix));
    assertOk(
      snapshot !== undefined && /^[0-9a-f]{40}$/.test(snapshot.slice(prefix.length)),
      `${s.node}: the engine runs from ${prefix}COMMIT: ${argv.join(" ")}`,
    );
    const config = JSON.parse(Deno.readTextFileSync(join(snapshot, "config.json")));
    assertEquals(config.num_hidden_layers, 80, `${s.node}: Llama 3.1 70B's config.json`);
  }
}

/** Waits until one request through the gateway succeeds (it polls the control plane). */
async function gatewayRoutes(burst: Cluster["burst"]): Promise<void> {
  await until("the gateway to route llama-70b", async () => {
    const r = await finished(await burst(1, 0));
    return r.ok === 1 || null;
  }, WAIT);
}

/** (c) agent-b's link flaps, each outage far below unreachable_after: nothing moves. */
async function flappingLink(k: Cluster): Promise<void> {
  const before = k.engines();
  const incidents = await k.incidents();
  const traffic = await k.burst(20, 200);
  await firstAnswer(traffic);
  await k.lab.flap(k.agents[1].lab, "mgmt", { times: 4, downMs: 400, upMs: 600 });
  const served = await finished(traffic);
  assertEquals(served.failed, 0, `requests failed while agent-b flapped: ${served.lines}`);
  await heartbeatAfter(k.api, k.agents, Date.now());
  assertEquals(k.engines(), before, "no engine restarted by the flap");
  assertEquals(await k.incidents(), incidents, "no node went unreachable, nothing rebuilt");
  assertEquals(await theReplica(k.api), k.placed, "the same replica on the same shards");
}

/**
 * (b) The control host cut off until the gateway has noticed (a poll
 * failed): requests keep succeeding, the agents keep their engines, and all
 * reconciles when it returns.
 */
async function controlCutOff(k: Cluster): Promise<void> {
  const before = k.engines();
  const incidents = await k.incidents();
  const gatewayLog = k.gateway.service("llmgw-gateway.service");
  const traffic = await k.burst(40, 250);
  await firstAnswer(traffic);
  await k.lab.linkDown(k.control.lab);
  try {
    await waitForLog(
      gatewayLog,
      "keeping the last known endpoints",
      "the gateway to lose the control plane",
    );
  } finally {
    await k.lab.linkUp(k.control.lab);
  }
  const served = await finished(traffic);
  assertEquals(
    served.failed,
    0,
    `requests failed while the control host was cut off: ${served.lines}`,
  );
  await waitForLog(gatewayLog, "control plane reachable again", "the gateway to poll again");
  await heartbeatAfter(k.api, k.agents, Date.now());
  assertEquals(k.engines(), before, "the agents kept their engines");
  assertEquals(await k.incidents(), incidents, "no node went unreachable, nothing rebuilt");
  assertEquals(await theReplica(k.api), k.placed, "reconciled: the same replica, ready");
}

/**
 * (a) agent-b's link down: unreachable, lost, the replica rebuilt on agent-c
 * from its second profile (agent-a's rank 0 stopped); agent-b's engine runs
 * on while it hears nothing and is stopped when the link returns. No other
 * engine starts or stops.
 */
async function hostLost(k: Cluster): Promise<void> {
  const before = k.engines();
  const [[oldA], [staleB]] = before;
  const b = k.agents[1];
  await k.lab.linkDown(b.lab);
  let rebuilt: ReplicaJson;
  try {
    rebuilt = await until("the replica rebuilt on agent-c", async () => {
      const r = await theReplica(k.api);
      return r?.state === "ready" && r.shards[0]?.node === "agent-c" ? r : null;
    }, { ...WAIT, timeoutMs: LIVENESS.lost_after * 1000 + 60_000 });
    assertEquals([rebuilt.id, rebuilt.profile], [k.placed.id, "a100-one-node"]);
    assertEquals((await k.api("/v1/nodes/agent-b")).state, "lost");
    await until("agent-a's old rank 0 stopped", () => groupMembers(oldA.pid).length === 0, WAIT);
    assertOk(groupMembers(staleB.pid).length > 0, "agent-b, cut off, heard nothing: it runs on");
  } finally {
    await k.lab.linkUp(b.lab);
  }
  const long = { ...WAIT, timeoutMs: 90_000 };
  await until("agent-b's stale shard stopped", () => groupMembers(staleB.pid).length === 0, long);
  await until(
    "agent-b ready again",
    async () => (await k.api("/v1/nodes/agent-b")).state === "ready" || null,
    long,
  );
  const endpoints = (await k.api("/v1/endpoints")).endpoints as { shard?: string }[];
  assertEquals(endpoints.map((e) => e.shard), [rebuilt.shards[0].shard_id], "one copy published");
  const after = k.engines();
  assertEquals([after[0], after[1]], [[], []], "agent-a and agent-b run nothing");
  assertEquals(after[2].map((e) => e.shard), [rebuilt.shards[0].shard_id]);
  assertOk(!before.flat().some((e) => e.pid === after[2][0].pid), "agent-c's engine is new");
  await gatewayRoutes(k.burst);
  const served = await finished(await k.burst(10, 50));
  assertEquals(served.failed, 0, `traffic to the rebuilt replica: ${served.lines}`);
  assertEquals(k.engines(), after, "nothing restarted since");
}

/** The admin API on the control host, with curl there: the JSON answer of GET `path`. */
function controlApi(control: RehearsalHost, ca: string, tokenFile: string): Api {
  const header = join(control.work, "..", "admin.header");
  Deno.writeTextFileSync(
    header,
    `authorization: Bearer ${Deno.readTextFileSync(tokenFile).trim()}\n`,
    {
      mode: 0o600,
    },
  );
  return async (path: string) => {
    const r = await control.lab.run("curl", [
      "-sS",
      "--fail",
      "--max-time",
      "10",
      "--cacert",
      ca,
      "-H",
      `@${header}`,
      `https://${control.address}:7070${path}`,
    ], { timeoutMs: 15_000 });
    if (!r.success) throw new Error(`GET ${path}: ${r.stderr.trim()}`);
    return JSON.parse(r.stdout) as Json;
  };
}

/** The deployment's one replica (null before it exists), without what changes as it runs. */
async function theReplica(api: Api): Promise<ReplicaJson | null> {
  const rs = (await api("/v1/replicas")).replicas as ReplicaJson[];
  assertOk(rs.length <= 1, `one replica, not ${rs.length}`);
  if (rs.length === 0) return null;
  const { id, state, profile, shards } = rs[0];
  return {
    id,
    state,
    profile,
    shards: shards.map(({ shard_id, rank, node }) => ({ shard_id, rank, node })),
  };
}

/** Waits until every agent has heartbeated after `t` (ms). */
async function heartbeatAfter(
  api: Api,
  agents: RehearsalHost[],
  t: number,
): Promise<void> {
  await until("a heartbeat from every agent", async () => {
    const ns = (await api("/v1/nodes")).nodes as NodeJson[];
    return agents.every((h) => {
      const n = ns.find((n) => n.id === h.name);
      return n?.state === "ready" && n.last_seen_ms > t;
    }) || null;
  }, WAIT);
}

/**
 * Every TLS listener refuses plain HTTP and a client trusting another CA,
 * and answers one trusting the cluster CA: control 7070, each agent's 9180
 * and 9181, the gateway 8443. Probed from the client host.
 */
async function assertTlsEverywhere(
  book: Rehearsal,
  client: RehearsalHost,
  control: RehearsalHost,
  agents: RehearsalHost[],
  gateway: RehearsalHost,
): Promise<void> {
  const other = join(client.work, "other-ca.crt");
  const made = await client.sh(
    "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 " +
      `-subj /CN=another-ca -keyout other-ca.key -out ${other} 2>&1`,
    book.shellEnv(client),
  );
  assertOk(made.success, `another CA: ${made.stdout}`);
  const targets = [
    [control.address, 7070, "/healthz"],
    ...agents.flatMap((h) => [[h.address, 9180, "/healthz"], [h.address, 9181, "/v1/models"]]),
    [gateway.address, 8443, "/v1/models"],
  ] as const;
  const probe = async (url: string, caFile: string) => {
    const r = await client.lab.run(Deno.execPath(), [
      "run",
      "--allow-net",
      "--allow-read",
      "--no-config",
      CLIENT,
      "probe",
      url,
      caFile,
      "5000",
    ], { timeoutMs: 30_000, env: { HOME: client.work, DENO_NO_UPDATE_CHECK: "1" } });
    assertOk(r.success, `probe ${url}: ${r.stderr}`);
    return JSON.parse(r.stdout) as { status?: number; error?: string };
  };
  for (const [host, port, path] of targets) {
    const trusted = await probe(`https://${host}:${port}${path}`, join(client.work, "ca.crt"));
    assertOk(trusted.status !== undefined, `${host}:${port} answers over TLS: ${trusted.error}`);
    const plain = await probe(`http://${host}:${port}${path}`, "-");
    assertOk(plain.error !== undefined, `${host}:${port} answered plain HTTP: ${plain.status}`);
    const wrong = await probe(`https://${host}:${port}${path}`, other);
    assertOk(wrong.error !== undefined, `${host}:${port} trusted by another CA: ${wrong.status}`);
    assertStringIncludes(wrong.error!.toLowerCase(), "certificate");
  }
}
