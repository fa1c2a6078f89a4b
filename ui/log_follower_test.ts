import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import type { ShardLogs } from "../control/agent_logs.ts";
import { AgentUnavailableError } from "../control/errors.ts";
import { LogFollowers, type LogNews, MAX_FOLLOWED, POLL_LINES } from "./log_follower.ts";

/** A reader over a growing log, counting the calls. */
function reader(log: string[]) {
  const calls: string[] = [];
  const read = (replica: string, rank: number, lines: number): Promise<ShardLogs> => {
    calls.push(`${replica}/${rank}/${lines}`);
    return Promise.resolve({
      shard_id: `${replica}.1/${rank}`,
      node: "n1",
      state: "ready",
      lines: log.slice(-lines),
      log_id: "L",
      first: Math.max(0, log.length - lines),
      probe_lines_hidden: 0,
    });
  };
  return { read, calls };
}

Deno.test("LogFollowers: watchers of one shard share one poller, one window and its ids", async () => {
  const log = ["a", "b"];
  const { read, calls } = reader(log);
  const followers = new LogFollowers(read);
  const seen: LogNews[][] = [[], []];
  const w1 = followers.watch("r0", 0, (n) => seen[0].push(n));
  await w1.ready;
  const w2 = followers.watch("r0", 0, (n) => seen[1].push(n));
  await w2.ready;
  try {
    assertEquals(followers.size, 1);
    assertEquals(calls[0], `r0/0/${POLL_LINES}`);
    assertEquals(w1.window(), w2.window());
    assertEquals(w1.window().lines.map((l) => l.text), ["a", "b"]);
    assertEquals(w1.status(), "shard r0.1/0 on n1: ready");
    log.push("c");
    await until(
      "both watchers told of c",
      () =>
        seen.every((s) => s.some((n) => n.kind === "lines" && n.lines.some((l) => l.text === "c"))),
    );
    assertEquals(w1.window().lines.map((l) => [l.seq, l.text]), [[1, "a"], [2, "b"], [3, "c"]]);
  } finally {
    w1.close();
    w2.close();
    followers.close();
  }
});

Deno.test("LogFollowers: an agent that cannot be asked is a status line, and the watch is ready", async () => {
  const followers = new LogFollowers(() =>
    Promise.reject(
      new AgentUnavailableError("agent_unreachable", "cannot reach node n1's agent: refused"),
    )
  );
  const news: LogNews[] = [];
  const w = followers.watch("r0", 0, (n) => news.push(n));
  try {
    await w.ready;
    assertStringIncludes(w.status() ?? "", "cannot reach node n1's agent");
    assertEquals(w.window().lines, []);
    assertOk(news.every((n) => n.kind === "status"));
  } finally {
    w.close();
    followers.close();
  }
});

Deno.test("LogFollowers: past the limit, the shard unwatched longest is dropped (its ids start a new window)", async () => {
  let now = 0;
  const followers = new LogFollowers(reader(["x"]).read, () => now++);
  const epochOf = async (replica: string) => {
    const w = followers.watch(replica, 0, () => {});
    await w.ready;
    w.close();
    return w.window().epoch;
  };
  try {
    const first = await epochOf("r0");
    const second = await epochOf("r1");
    for (let i = 2; i <= MAX_FOLLOWED; i++) await epochOf(`r${i}`);
    assertEquals(followers.size, MAX_FOLLOWED);
    // r0 was dropped; r1, still kept, keeps its window.
    assertEquals(await epochOf("r1"), second);
    assertOk(await epochOf("r0") !== first);
  } finally {
    followers.close();
  }
});

Deno.test("LogFollowers: the status line says how many probe lines the agent left out", async () => {
  const read = (replica: string, rank: number): Promise<ShardLogs> =>
    Promise.resolve({
      shard_id: `${replica}.1/${rank}`,
      node: "n1",
      state: "ready",
      lines: ["a"],
      log_id: "L",
      first: 0,
      probe_lines_hidden: 240,
    });
  const followers = new LogFollowers(read);
  const w = followers.watch("r0", 0, () => {});
  try {
    await w.ready;
    assertEquals(w.status(), "shard r0.1/0 on n1: ready (240 probe lines hidden)");
  } finally {
    w.close();
    followers.close();
  }
});
