/**
 * The desired-state loop against a scripted control plane (design §10):
 * fencing, level-triggered reconciles, a shard listed twice, a refused
 * token, failed polls and a woken poll. Each script ends by stopping the
 * loop, so `run()` returning is the end of every test.
 */
import { assertEquals } from "../tests/assert.ts";
import { desiredLaunch } from "../tests/shard_launch.ts";
import type { DesiredShard, DesiredState } from "../protocol/agent_protocol.ts";
import { ControlError } from "./control_client.ts";
import { DesiredStateLoop } from "./desired_state_loop.ts";
import type { Logger, LogLevel } from "../log/log.ts";

interface Harness {
  loop: DesiredStateLoop;
  stop: AbortController;
}

/** One answer of the scripted control plane, or what makes it. */
type Step =
  | DesiredState
  | null
  | Error
  | ((h: Harness, signal: AbortSignal) => DesiredState | null | Promise<DesiredState | null>);

interface Line {
  level: LogLevel;
  msg: string;
  fields: Record<string, unknown>;
}

function shard(id: string, engine = "vllm"): DesiredShard {
  return { id, engine, launch: desiredLaunch(id) };
}

function state(generation: number, shards: DesiredShard[]): DesiredState {
  return { generation, shards };
}

/** Runs the loop over `script` until it is used up. */
async function runScript(script: Step[]) {
  const stop = new AbortController();
  const lines: Line[] = [];
  const log: Logger = {
    log: (level, msg, fields = {}) => lines.push({ level, msg, fields }),
    info: (msg, fields) => log.log("info", msg, fields),
    warn: (msg, fields) => log.log("warn", msg, fields),
    error: (msg, fields) => log.log("error", msg, fields),
  };
  const asked: number[] = [];
  const reconciled: { id: string; engine: string }[][] = [];
  const refused: (string | null)[] = [];
  const harness: Harness = {
    stop,
    loop: new DesiredStateLoop({
      client: {
        nodeToken: "node-token-1",
        desired: async (generation, _waitMs, signal) => {
          asked.push(generation);
          const step = script.shift();
          if (step === undefined) {
            stop.abort();
            return null;
          }
          if (step instanceof Error) throw step;
          return typeof step === "function" ? await step(harness, signal!) : step;
        },
      },
      session: {
        ensureRegistered: () => Promise.resolve(true),
        refused: (token) => {
          refused.push(token);
          return Promise.resolve();
        },
      },
      reconcile: (shards: DesiredShard[]) => {
        reconciled.push(shards.map((s) => ({ id: s.id, engine: s.engine })));
        return Promise.resolve();
      },
      longPollMs: 10,
      retry: { initialMs: 1, maxMs: 1, factor: 2 },
      log,
      signal: stop.signal,
    }),
  };
  await harness.loop.run();
  const said = (msg: string) => lines.filter((l) => l.msg === msg);
  return { loop: harness.loop, asked, reconciled, refused, said };
}

Deno.test("an older desired state is ignored, logged once, and taken after a registration", async () => {
  const r = await runScript([
    state(5, [shard("a")]),
    state(3, [shard("b")]),
    state(3, [shard("b")]),
    (h) => {
      h.loop.registered();
      return state(3, [shard("b")]);
    },
  ]);
  assertEquals(r.reconciled, [[{ id: "a", engine: "vllm" }], [{ id: "b", engine: "vllm" }]]);
  assertEquals(r.loop.generation, 3);
  assertEquals(r.loop.ignoredGeneration, null);
  assertEquals(r.asked, [0, 5, 5, 5, 3]);
  assertEquals(r.said("ignoring an older desired state").map((l) => l.fields), [
    { generation: 3, running: 5 },
  ]);
  assertEquals(r.said("desired state applied").map((l) => l.fields.generation), [5, 3]);
});

Deno.test("a state of the running generation is reconciled again; a shard listed twice keeps the first", async () => {
  const r = await runScript([
    state(1, [shard("a"), shard("a", "sglang")]),
    (h) => {
      h.stop.abort();
      return state(1, [shard("a")]);
    },
  ]);
  assertEquals(r.reconciled, [[{ id: "a", engine: "vllm" }], [{ id: "a", engine: "vllm" }]]);
  assertEquals(r.said("desired state lists a shard twice; the first wins").length, 1);
  assertEquals(r.said("desired state applied").length, 1);
  assertEquals(r.loop.generation, 1);
});

Deno.test("a refused node token is handed back, and the poll asks again", async () => {
  const r = await runScript([
    new ControlError("http", "refused", { status: 401, code: "unauthorized" }),
    state(2, [shard("a")]),
  ]);
  assertEquals(r.refused, ["node-token-1"]);
  assertEquals(r.said("desired state poll failed").length, 0);
  assertEquals(r.loop.generation, 2);
});

Deno.test("failed polls are logged with their count and kind, and reset by an answer", async () => {
  const r = await runScript([
    new ControlError("network", "connection refused"),
    new ControlError("timeout", "no answer"),
    state(1, []),
    new ControlError("network", "connection refused"),
  ]);
  assertEquals(
    r.said("desired state poll failed").map((l) => [l.fields.failures, l.fields.kind]),
    [[1, "network"], [2, "timeout"], [1, "network"]],
  );
  assertEquals(r.loop.generation, 1);
});

Deno.test("a wake ends a held poll without counting a failure", async () => {
  const r = await runScript([
    (h, signal) => {
      const held = new Promise<null>((_, reject) =>
        signal.addEventListener("abort", () => reject(new ControlError("aborted", "aborted")))
      );
      h.loop.wake();
      return held;
    },
    state(4, [shard("a")]),
  ]);
  assertEquals(r.said("desired state poll failed").length, 0);
  assertEquals(r.asked, [0, 0, 4]);
  assertEquals(r.loop.generation, 4);
});

Deno.test("during a reconcile the state being reconciled is `received` (its model sources serve the fetches it starts); `applied` after", async () => {
  const stop = new AbortController();
  const sources = [{
    model: "acme/m",
    peers: [{ node_id: "n1", url: "https://n1:7400" }],
    origin: true,
  }];
  const script: DesiredState[] = [
    state(1, [shard("a")]),
    { ...state(2, [shard("a")]), model_sources: sources },
  ];
  const seen: [number | undefined, number | undefined, boolean][] = [];
  const silent: Logger = { log: () => {}, info: () => {}, warn: () => {}, error: () => {} };
  const loop: DesiredStateLoop = new DesiredStateLoop({
    client: {
      nodeToken: "node-token-1",
      desired: () => {
        const next = script.shift();
        if (next === undefined) stop.abort();
        return Promise.resolve(next ?? null);
      },
    },
    session: { ensureRegistered: () => Promise.resolve(true), refused: () => Promise.resolve() },
    reconcile: () => {
      seen.push([
        loop.received?.generation,
        loop.applied?.generation,
        loop.received?.model_sources !== undefined,
      ]);
      return Promise.resolve();
    },
    longPollMs: 10,
    retry: { initialMs: 1, maxMs: 1, factor: 2 },
    log: silent,
    signal: stop.signal,
  });
  await loop.run();
  assertEquals(seen, [[1, undefined, false], [2, 1, true]]);
  assertEquals(loop.applied?.model_sources, sources);
});
