/**
 * Shards are llmgw's own (issue #13, design §9.3, §11.2), with real processes
 * on loopback: an agent on simulated hardware running the fake engine, the
 * control plane, and the gateway following it; "foreign" HTTP servers in
 * this test process stand in for a process llmgw did not start (a
 * hand-started `vllm serve`, a second dev cluster).
 *
 * - A port of the agent's range held by another process is skipped and the
 *   holder named; the gateway's traffic never reaches it.
 * - An engine killed and its port taken at once: the shard fails and moves,
 *   and is never reported ready on the old port again.
 * - An agent restart adopts its engines on the same ports, and readiness is
 *   judged again by the new agent, ownership included: a pid file whose
 *   process is gone, or whose process no longer holds its port, never makes
 *   a foreign listener a ready shard.
 * - The agent's engine proxy forwards nothing (and no engine key) to a port
 *   its shard was never found to hold.
 *
 * Every engine is killed by process group and every server closed in
 * `finally` (tests/port_ownership_fixtures.ts).
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import {
  chat,
  foreignAtRangeStart,
  type ForeignServer,
  oneShardDeployment,
  POLL,
  type PortCluster,
  serveForeignWhenFree,
  shardOf,
  supervisorEvents,
  untilNodes,
  untilShardReady,
  withPortCluster,
} from "./port_ownership_fixtures.ts";
import { until } from "./until.ts";
import type { Agent } from "../agent/agent.ts";
import { proxyTokenPath } from "../agent/credentials.ts";
import { SHARD_HEADER } from "../agent/engine_proxy.ts";
import { describeHolders, portOwnership } from "../supervisor/listen_owner.ts";
import { fingerprint, readPidFile, writePidFile } from "../supervisor/pid_file.ts";
import { isPortFree, type PortRange } from "../supervisor/port_allocator.ts";
import { groupMembers } from "../supervisor/proc.ts";
import { shardDirName } from "../supervisor/supervisor.ts";
import { portBlock, portsOf } from "./port_plan.ts";
import type { ShardReport } from "../supervisor/types.ts";

/** This file's ports (tests/port_plan.ts): each test searches its own block of them. */
const PORTS = portsOf(import.meta.url);

/** Ten starts of a range of 100, 10 apart, from the `block`-th block of this file's ports. */
function candidates(block: number): number[] {
  const base = portBlock(PORTS, block).from;
  return Array.from({ length: 10 }, (_, i) => base + 10 * i);
}

/** A range of 100 ports whose first block of 10 is free now, so the first shard gets its first port. */
function freeRange(block: number): PortRange {
  for (const from of candidates(block)) {
    if (Array.from({ length: 10 }, (_, i) => from + i).every(isPortFree)) {
      return { from, to: from + 99 };
    }
  }
  throw new Error(`Cannot find 10 free ports at any of ${candidates(block).join(", ")}`);
}

/** This process's command line as /proc shows it, joined as describeHolders joins it. */
function ownHolderText(): string {
  return describeHolders([{
    pid: Deno.pid,
    cmdline: Deno.readTextFileSync("/proc/self/cmdline").split("\0").filter((a) => a !== ""),
  }]);
}

/** What a foreign server received, for messages. */
function received(f: ForeignServer): string {
  return JSON.stringify(
    f.requests.map((r) => ({ ...r, authorization: r.authorization === null ? null : "(sent)" })),
  );
}

/** One look at a shard from somewhere: the agent's supervisor or the control plane. */
interface Seen {
  state: string;
  port: number;
  pid: number | null;
}

/**
 * From the first observation on, `seen` may start with the stale "ready on
 * `port`" of the look before the change was noticed, each naming
 * `stalePid` (the old engine) when given; once it shows anything else, it
 * never shows ready on `port` again. It must have left.
 */
function assertLeftReadyForGood(
  seen: readonly Seen[],
  port: number,
  where: string,
  stalePid?: number,
): void {
  let left = -1;
  seen.forEach((o, i) => {
    const readyOnOld = o.state === "ready" && o.port === port;
    if (!readyOnOld) {
      if (left === -1) left = i;
      return;
    }
    assertOk(
      left === -1,
      `${where}: ready on the old port ${port} again at observation ${i}, after it had left ` +
        `ready at observation ${left}: ${JSON.stringify(seen.slice(left, i + 1))}`,
    );
    if (stalePid !== undefined) {
      assertEquals(
        o.pid,
        stalePid,
        `${where}: a ready on port ${port} that is not the stale report`,
      );
    }
  });
  assertOk(left !== -1, `${where}: never left ready on port ${port}`);
}

/** The agent's shard of `deployment` as one observation (null when it has none). */
function lookAt(agent: Agent, deployment: string): Seen | null {
  const s = shardOf(agent, deployment);
  return s === null ? null : { state: s.state, port: s.port, pid: s.pid };
}

/** The control plane's replica of `deployment`, rank 0, as one observation. */
async function lookAtControl(c: PortCluster, deployment: string): Promise<Seen | null> {
  const r = (await c.replicas()).find((x) => x.deployment === deployment);
  const s = r?.shards.find((x) => x.rank === 0);
  if (r === undefined || s === undefined) return null;
  // The replica's state is what the gateway acts on; the shard's port is where it would go.
  return { state: r.state, port: s.port, pid: null };
}

/**
 * Waits until the gateway's table routes `model` to exactly this shard: through
 * its agent's engine proxy (the shard named) or, for an agent without one,
 * straight to the shard's port.
 */
async function untilGatewayRoutes(
  c: PortCluster,
  model: string,
  agent: Agent,
  shard: ShardReport,
): Promise<void> {
  const target = (e: { url: string; shard?: string }) =>
    e.shard !== undefined
      ? `proxy ${Number(new URL(e.url).port)} shard ${e.shard}`
      : `engine ${Number(new URL(e.url).port)}`;
  const want = agent.proxyAddr !== null
    ? `proxy ${agent.proxyAddr.port} shard ${shard.id}`
    : `engine ${shard.port}`;
  await until(`the gateway to route ${model} to ${want}`, () => {
    const routes = c.table.endpoints(model).map(target);
    return routes.length === 1 && routes[0] === want ? true : null;
  }, { ...POLL, describe: () => JSON.stringify(c.table.endpoints(model).map(target)) });
}

/** Asserts the socket on `port` is held by `pid`'s process group and nobody else. */
function assertOwnedBy(port: number, pid: number): void {
  const members = groupMembers(pid);
  const owner = portOwnership(port, members);
  assertEquals(owner.kind, "ours", `port ${port}: ${JSON.stringify(owner)}`);
  assertOk(owner.kind === "ours" && members.includes(owner.pid));
}

/** Asserts the socket on `port` is this test process's, not `pid`'s group's. */
function assertHeldByUs(port: number, pid: number): void {
  const owner = portOwnership(port, groupMembers(pid));
  assertOk(
    owner.kind === "foreign" && owner.ours === null &&
      owner.holders.length === 1 && owner.holders[0].pid === Deno.pid,
    `port ${port} should be the test's foreign server's: ${JSON.stringify(owner)}`,
  );
}

async function untilControlReadyOn(
  c: PortCluster,
  deployment: string,
  port: number,
  record: (s: Seen | null) => void = () => {},
): Promise<void> {
  await until(`the control plane to report ${deployment} ready on port ${port}`, async () => {
    const s = await lookAtControl(c, deployment);
    record(s);
    return s?.state === "ready" && s.port === port ? true : null;
  }, POLL);
}

async function apply(c: PortCluster, deployment: string): Promise<void> {
  const res = await c.admin("POST", "/v1/deployments", oneShardDeployment(deployment));
  assertEquals(res.status, 201, await res.text());
}

Deno.test("a foreign server holds the range's first port: the shard is ready on other ports, 100 gateway requests never reach it, an event names the holder", async () => {
  await withPortCluster(async (c) => {
    const { foreign, range } = foreignAtRangeStart(candidates(0));
    c.servers.push(foreign);
    const P = foreign.port;
    const { agent } = await c.startAgent({ id: "held-1", ports: range });
    await untilNodes(c, 1);
    await apply(c, "held");
    const shard = await untilShardReady(agent, "held");
    c.groups.add(shard.pid!);

    assertOk(shard.port !== P, `the shard took the held port ${P}`);
    assertOk(
      shard.port > P && shard.port <= range.to,
      `port ${shard.port} outside ${range.from}-${range.to}`,
    );
    assertOwnedBy(shard.port, shard.pid!);
    assertHeldByUs(P, shard.pid!);
    // The notice names the holder (this process) and where the shard went instead.
    assertEquals(
      shard.notice?.message,
      `port ${P} is held by ${ownHolderText()}; using ports from ${shard.port}`,
    );

    await untilGatewayRoutes(c, "held", agent, shard);
    for (let i = 0; i < 100; i++) {
      const { status, body } = await chat(c.gateway, "held");
      assertEquals(status, 200, `request ${i}: ${JSON.stringify(body)}`);
      assertOk(!("foreign" in body), `request ${i} was answered by the foreign server`);
      assertEquals([body.object, body.model], ["chat.completion", "held"], `request ${i}`);
    }
    assertEquals(
      foreign.requests.length,
      0,
      `the foreign server was reached: ${received(foreign)}`,
    );

    // A control-plane event names the holder: this test process, a deno command.
    const event = await until("a shard_notice event", async () => {
      return (await c.events()).find((e) => e.kind === "shard_notice") ?? null;
    }, POLL);
    assertEquals(event.subject, "replica/held-r0");
    const m = /port (\d+) is held by pid (\d+) \((.*)\); using ports from (\d+)$/.exec(
      event.message,
    );
    assertOk(m !== null, `unexpected notice: ${event.message}`);
    assertEquals([Number(m[1]), Number(m[2]), Number(m[4])], [P, Deno.pid, shard.port]);
    assertStringIncludes(m[3], "deno");
    // Still exactly one engine, never restarted: nothing failed on the way.
    assertEquals(shardOf(agent, "held")?.restarts, 0);
    assertEquals(shardOf(agent, "held")?.last_failure, null);
  });
});

Deno.test("an engine is killed and a foreign server takes its port at once: the shard fails, moves, and is never ready on the old port again", async () => {
  await withPortCluster(async (c) => {
    const range = freeRange(1);
    const { agent, logs } = await c.startAgent({ id: "kill-1", ports: range });
    await untilNodes(c, 1);
    await apply(c, "kill");
    const first = await untilShardReady(agent, "kill");
    const E = first.pid!;
    const P = first.port;
    c.groups.add(E);
    assertEquals(P, range.from, "the first shard gets the first free block");
    assertOwnedBy(P, E);
    await untilControlReadyOn(c, "kill", P);
    await untilGatewayRoutes(c, "kill", agent, first);
    const logsBefore = logs.length;

    Deno.kill(-E, "SIGKILL");
    const foreign = await serveForeignWhenFree(P);
    c.servers.push(foreign);
    assertHeldByUs(P, E);

    // From the bind on, every look at the shard is kept: the agent's and
    // the control plane's.
    const agentSeen: Seen[] = [];
    const controlSeen: Seen[] = [];
    const look = async () => {
      const a = lookAt(agent, "kill");
      if (a !== null) agentSeen.push(a);
      const cp = await lookAtControl(c, "kill");
      if (cp !== null) controlSeen.push(cp);
    };
    const again = await until("the shard ready again on another port", async () => {
      await look();
      const s = shardOf(agent, "kill");
      return s?.state === "ready" && s.port !== P ? s : null;
    }, { ...POLL, intervalMs: 10, describe: () => JSON.stringify(agentSeen.slice(-5)) });
    const Q = again.port;
    c.groups.add(again.pid!);
    await until("the control plane to follow to the new port", async () => {
      await look();
      const cp = controlSeen.at(-1);
      return cp?.state === "ready" && cp.port === Q;
    }, { ...POLL, intervalMs: 10 });
    await untilGatewayRoutes(c, "kill", agent, again);

    // The stale "ready" of the look before the kill was noticed names the
    // dead engine; after that, ready on P never comes back anywhere.
    assertLeftReadyForGood(agentSeen, P, "the agent", E);
    assertLeftReadyForGood(controlSeen, P, "the control plane");

    // It went through a failure, and a new engine of its own serves on a new port.
    const after = supervisorEvents(logs.slice(logsBefore)).filter((e) => e.shard === again.id);
    const failedAt = after.findIndex((e) =>
      e.kind === "state" && /^ready → (backoff|failed): /.test(e.msg)
    );
    assertOk(failedAt !== -1, `no failure after the kill: ${JSON.stringify(after)}`);
    const spawnedAt = after.findIndex((e, i) => i > failedAt && e.kind === "spawned");
    assertOk(spawnedAt !== -1, `no new engine after the failure: ${JSON.stringify(after)}`);
    assertOk(
      after.some((e, i) => i > spawnedAt && e.kind === "state" && / → ready: /.test(e.msg)),
      `no ready after the new engine: ${JSON.stringify(after)}`,
    );
    assertOk(again.pid !== E && again.restarts >= 1 && again.last_failure !== null);
    assertOk(Q !== P && Q >= range.from && Q <= range.to, `new port ${Q}`);
    assertEquals(groupMembers(E), [], "the killed engine's group is gone");
    assertOwnedBy(Q, again.pid!);
    assertHeldByUs(P, again.pid!);
    // The new run skipped the held port and said who holds it.
    assertEquals(
      again.notice?.message,
      `port ${P} is held by ${ownHolderText()}; using ports from ${Q}`,
    );
    // No probe and no gateway request ever reached the foreign server.
    assertEquals(
      foreign.requests.length,
      0,
      `the foreign server was reached: ${received(foreign)}`,
    );
    // And traffic goes to the new engine.
    const { status, body } = await chat(c.gateway, "kill");
    assertEquals([status, body.object], [200, "chat.completion"], JSON.stringify(body));
    assertEquals(foreign.requests.length, 0);
  });
});

/** Starts an agent, deploys one shard on it, waits until it is ready everywhere. */
async function readyShard(
  c: PortCluster,
  id: string,
  deployment: string,
  range: PortRange,
): Promise<{ first: ShardReport; stateDir: string }> {
  const { agent, stateDir } = await c.startAgent({ id, ports: range });
  await untilNodes(c, 1);
  await apply(c, deployment);
  const first = await untilShardReady(agent, deployment);
  c.groups.add(first.pid!);
  assertOwnedBy(first.port, first.pid!);
  await untilControlReadyOn(c, deployment, first.port);
  // The old agent goes away; its engine is left running for the next one.
  await agent.stop({ stopEngines: false });
  assertOk(groupMembers(first.pid!).length > 0, "the engine outlived its agent");
  return { first, stateDir };
}

Deno.test("agent restart: the new agent adopts its engine on the same port and judges it ready itself", async () => {
  await withPortCluster(async (c) => {
    const range = freeRange(2);
    const { first } = await readyShard(c, "adopt-1", "adopt", range);
    const E = first.pid!;
    const P = first.port;

    const { agent, logs } = await c.startAgent({ id: "adopt-1", ports: range });
    const ready = await untilShardReady(agent, "adopt");
    assertEquals(
      [ready.id, ready.pid, ready.port, ready.adopted, ready.restarts],
      [first.id, E, P, true, 0],
    );
    assertOwnedBy(P, E);
    // The new supervisor adopted it as starting and made it ready after its
    // own probe (ownership first, then the plugin's readiness): readiness is
    // never carried over from the pid file.
    const events = supervisorEvents(logs).filter((e) => e.shard === first.id);
    const adopted = events.findIndex((e) =>
      e.kind === "state" && e.msg === `pending → starting: adopted pid ${E}`
    );
    assertOk(adopted !== -1, `no adoption: ${JSON.stringify(events)}`);
    assertOk(
      events.some((e, i) => i > adopted && e.kind === "state" && / → ready: /.test(e.msg)),
      `not made ready after adoption: ${JSON.stringify(events)}`,
    );
    assertEquals(
      events.filter((e) => ["spawned", "port_held", "adoption_refused"].includes(e.kind)),
      [],
    );
    // Its ports are the new agent's again; the control plane and gateway keep them.
    await untilControlReadyOn(c, "adopt", P);
    await untilGatewayRoutes(c, "adopt", agent, ready);
    const { status, body } = await chat(c.gateway, "adopt");
    assertEquals([status, body.object, body.model], [200, "chat.completion", "adopt"]);
    assertEquals(shardOf(agent, "adopt")?.pid, E, "the same engine serves");
  });
});

Deno.test("agent restart after the engine died and a foreign server took its port: not adopted, never ready on that port, relaunched elsewhere", async () => {
  await withPortCluster(async (c) => {
    const range = freeRange(3);
    const { first } = await readyShard(c, "gone-1", "gone", range);
    const E = first.pid!;
    const P = first.port;
    Deno.kill(-E, "SIGKILL");
    await until("the old engine gone", () => groupMembers(E).length === 0, POLL);
    const foreign = await serveForeignWhenFree(P);
    c.servers.push(foreign);

    const agentSeen: Seen[] = [];
    const controlSeen: Seen[] = [];
    const { agent, logs } = await c.startAgent({ id: "gone-1", ports: range });
    const again = await until("the shard ready on another port", async () => {
      const a = lookAt(agent, "gone");
      if (a !== null) agentSeen.push(a);
      const cp = await lookAtControl(c, "gone");
      if (cp !== null) controlSeen.push(cp);
      const s = shardOf(agent, "gone");
      return s?.state === "ready" && s.port !== P ? s : null;
    }, { ...POLL, intervalMs: 10 });
    c.groups.add(again.pid!);
    await untilControlReadyOn(c, "gone", again.port, (s) => s !== null && controlSeen.push(s));

    // The new agent never showed the old port at all: what it runs is its own.
    assertEquals(agentSeen.filter((s) => s.port === P), [], "the new agent used the held port");
    // The control plane may still show the old agent's last report at first; never again after.
    assertLeftReadyForGood(controlSeen, P, "the control plane");
    const events = supervisorEvents(logs);
    assertOk(
      events.some((e) =>
        e.kind === "adoption_refused" && e.msg === `not adopting: pid ${E} is not running`
      ),
      `the dead engine's pid file was not refused: ${JSON.stringify(events)}`,
    );
    assertEquals(events.filter((e) => e.kind === "adopted"), []);
    assertOk(again.port !== P && again.pid !== E && !again.adopted);
    assertEquals(
      again.notice?.message,
      `port ${P} is held by ${ownHolderText()}; using ports from ${again.port}`,
    );
    assertOwnedBy(again.port, again.pid!);
    assertHeldByUs(P, again.pid!);
    assertEquals(
      foreign.requests.length,
      0,
      `the foreign server was reached: ${received(foreign)}`,
    );
  });
});

/**
 * The shard's engine dies and a foreign server takes its port; its pid file
 * is then pointed at a live stand-in (`sleep`, its own process group, a
 * matching fingerprint) that listens on nothing: a process that is still
 * "the engine" by every fingerprint but no longer holds the engine's port,
 * as an engine whose HTTP server died while its process lives would be.
 * The caller kills the stand-in and awaits it.
 */
async function standInOnForeignPort(
  c: PortCluster,
  first: ShardReport,
  stateDir: string,
): Promise<{ standIn: Deno.ChildProcess; foreign: ForeignServer }> {
  const pidFile = join(stateDir, "shards", shardDirName(first.id), "pid.json");
  const read = readPidFile(pidFile);
  assertOk("record" in read, `pid file: ${JSON.stringify(read)}`);
  Deno.kill(-first.pid!, "SIGKILL");
  await until("the old engine gone", () => groupMembers(first.pid!).length === 0, POLL);
  const foreign = await serveForeignWhenFree(first.port);
  c.servers.push(foreign);
  const standIn = new Deno.Command("sleep", {
    args: ["600"],
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: true,
  }).spawn();
  c.groups.add(standIn.pid);
  try {
    const fp = await until("the stand-in's fingerprint", () => {
      const f = fingerprint(standIn.pid);
      return f !== null && /(^|\/)sleep$/.test(f.cmdline[0] ?? "") ? f : null;
    }, POLL);
    assertEquals(fp.pgid, standIn.pid, "the stand-in leads its own process group");
    writePidFile(pidFile, {
      ...read.record,
      pid: standIn.pid,
      pgid: standIn.pid,
      start_time: fp.start_time,
      cmdline: fp.cmdline,
    });
  } catch (e) {
    Deno.kill(-standIn.pid, "SIGKILL");
    await standIn.status;
    throw e;
  }
  return { standIn, foreign };
}

Deno.test("agent restart adopting a live process that no longer holds its port: ownership is re-checked, the holder named, the shard moved", async () => {
  await withPortCluster(async (c) => {
    const range = freeRange(4);
    const { first, stateDir } = await readyShard(c, "stray-1", "stray", range);
    const P = first.port;
    const { standIn, foreign } = await standInOnForeignPort(c, first, stateDir);
    try {
      const agentSeen: Seen[] = [];
      const { agent, logs } = await c.startAgent({ id: "stray-1", ports: range });
      const again = await until("the shard ready on another port", () => {
        const a = lookAt(agent, "stray");
        if (a !== null) agentSeen.push(a);
        const s = shardOf(agent, "stray");
        return s?.state === "ready" && s.port !== P ? s : null;
      }, {
        ...POLL,
        intervalMs: 10,
        describe: () =>
          JSON.stringify({
            seen: agentSeen.slice(-3),
            shard: shardOf(agent, "stray"),
            events: supervisorEvents(logs),
          }),
      });
      c.groups.add(again.pid!);

      // Adopted, then failed on ownership before any probe, never ready on P.
      const events = supervisorEvents(logs).filter((e) => e.shard === first.id);
      assertOk(
        events.some((e) => e.kind === "adopted" && e.msg === `adopted pid ${standIn.pid}`),
        `the stand-in was not adopted: ${JSON.stringify(events)}`,
      );
      assertOk(
        events.some((e) => e.kind === "port_held" && e.msg === `port ${P}: ${ownHolderText()}`),
        `no port_held event naming this process: ${JSON.stringify(events)}`,
      );
      assertEquals(
        agentSeen.filter((s) => s.state === "ready" && s.port === P),
        [],
        "ready on the foreign-held port",
      );
      const reason = `port ${P} is held by ${ownHolderText()}, not by the engine llmgw started`;
      assertEquals(again.last_failure?.reason, reason);
      assertEquals(
        foreign.requests.length,
        0,
        `the foreign server was probed: ${received(foreign)}`,
      );
      // The stand-in was stopped with its group; a new engine of its own serves elsewhere.
      assertEquals(groupMembers(standIn.pid), [], "the stand-in still runs");
      assertOk(again.port !== P && again.pid !== standIn.pid && again.restarts >= 1);
      assertOwnedBy(again.port, again.pid!);
      // The failure reached the control plane's events with the holder.
      const failed = await until("a shard_failed event naming the holder", async () => {
        return (await c.events()).find((e) =>
          e.kind === "shard_failed" && e.message.includes(reason)
        ) ?? null;
      }, POLL);
      assertEquals(failed.subject, "replica/stray-r0");
      await untilControlReadyOn(c, "stray", again.port);
      await untilGatewayRoutes(c, "stray", agent, again);
      const { status, body } = await chat(c.gateway, "stray");
      assertEquals([status, body.object, body.model], [200, "chat.completion", "stray"]);
    } finally {
      try {
        Deno.kill(-standIn.pid, "SIGKILL");
      } catch {
        // Already stopped (by llmgw, as the test expects).
      }
      await standIn.status;
    }
  });
});

Deno.test("the engine proxy forwards nothing, and no engine key, to a port its shard was never found to hold", async () => {
  await withPortCluster(async (c) => {
    const range = freeRange(5);
    const { first, stateDir } = await readyShard(c, "proxy-1", "proxy", range);
    const P = first.port;
    const keyFile = join(stateDir, "shards", shardDirName(first.id), "engine_key");
    const key = Deno.readTextFileSync(keyFile).trim();
    assertOk(key.length >= 16, "the engine had a key");
    const { standIn, foreign } = await standInOnForeignPort(c, first, stateDir);
    try {
      // A supervisor tick of a minute: the only look at the adopted shard is
      // the one at the agent's start, before its first heartbeat (issue #23
      // item 4), while the control plane still shows the old agent's last
      // "ready" and gateways send traffic to this proxy. It finds the port
      // held by another process, so the shard is not ready.
      const { agent } = await c.startAgent({ id: "proxy-1", ports: range, tickMs: 60_000 });
      const s = shardOf(agent, "proxy");
      assertOk(
        s != null && s.state !== "ready",
        `ready on a port it does not hold: ${JSON.stringify(s)}`,
      );
      assertOk(agent.proxyAddr !== null, "the agent serves its engine proxy");
      const token = Deno.readTextFileSync(proxyTokenPath(stateDir)).trim();
      const res = await fetch(`http://127.0.0.1:${agent.proxyAddr.port}/v1/chat/completions`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          [SHARD_HEADER]: first.id,
          "content-type": "application/json",
        },
        body: JSON.stringify({ model: "proxy", messages: [{ role: "user", content: "hi" }] }),
      });
      const text = await res.text();
      assertOk(
        foreign.requests.every((r) => r.authorization !== `Bearer ${key}`),
        `the engine's key was sent to the foreign holder of port ${P}`,
      );
      assertOk(
        !text.includes('"foreign"'),
        `the proxy forwarded to the foreign holder of port ${P}: ${res.status} ${text}`,
      );
      assertOk(res.status >= 400, `a shard not known to be ready answered ${res.status}: ${text}`);
      assertEquals(
        foreign.requests.length,
        0,
        `the foreign server was reached: ${received(foreign)}`,
      );
    } finally {
      try {
        Deno.kill(-standIn.pid, "SIGKILL");
      } catch {
        // Already stopped.
      }
      await standIn.status;
    }
  });
});
