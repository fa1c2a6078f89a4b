/**
 * The agent with its model cache against the fake hub on a real port (issue
 * #25 items 2, 4, 5): a shard goes `downloading` (bytes, rate and source in
 * its heartbeat) while a synthetic model arrives through the rate-capped
 * hub, then the fake engine starts from the snapshot directory with the hub
 * switched off, and only the agent ever asked the hub. A gated repo the
 * token was not granted, and a commit the hub does not know, fail their
 * shards for good with the hub's words. The token appears in no log line,
 * heartbeat or engine environment. Every server, agent and engine process
 * group is stopped in a `finally`.
 */
import { startFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { HubToken } from "../models/hub_config.ts";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { until } from "../tests/until.ts";
import { shardLaunch } from "../tests/shard_launch.ts";
import {
  agentOptions,
  freePort,
  LOCAL_TOKEN,
  reported,
  StubControl,
} from "../tests/stub_control.ts";
import { Agent } from "./agent.ts";
import { parseRecord, RECORD_FILE } from "./engine_cache/engine_cache_record.ts";

const TOKEN = "hf_agentsecret_0123456789abcdef";
const WAIT = { timeoutMs: 60_000, intervalMs: 20 };

/** The NUL-separated entries of a /proc file. */
function procEntries(pid: number, file: "cmdline" | "environ"): string[] {
  return Deno.readTextFileSync(`/proc/${pid}/${file}`).split("\0").filter((e) => e !== "");
}

/** An agent on the stub control plane whose model cache fetches from `endpoint` with the token. */
function modelAgent(stub: StubControl, stateDir: string, logs: string[], endpoint: string): Agent {
  const base = agentOptions(stub.url, stub.joinToken, stateDir, logs);
  return new Agent({
    ...base,
    supervisor: {
      ...base.supervisor,
      // The engine is told where the hub is, as an agent's environment would.
      env: { ...base.supervisor?.env, HF_ENDPOINT: endpoint },
    },
    models: {
      cache: {
        root: `${stateDir}/models`,
        rateBytesPerSecond: null,
        watermarks: { highPercent: 90, lowPercent: 80 },
      },
      hub: { endpoint, token: new HubToken(TOKEN) },
    },
  });
}

Deno.test("agent: a hub model is downloaded before its engine starts, offline, from the cache; final hub answers fail the shard", async () => {
  const model = await syntheticModel({
    repo: "acme/tiny-llm",
    shards: 2,
    weightBytes: 2 * 2 ** 20,
  });
  const gated = await syntheticModel({
    repo: "acme/gated",
    shards: 1,
    weightBytes: 4096,
    gated: "manual",
  });
  // About a second of download: long enough for a heartbeat to show it.
  const hub = startFakeHub({ repos: [model, gated], tokens: [TOKEN], bytesPerSecond: 2 * 2 ** 20 });
  const stub = new StubControl();
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_models_" });
  const logs: string[] = [];
  const groups = new Set<number>();
  stub.start();
  const agent = modelAgent(stub, stateDir, logs, hub.endpoint);
  try {
    await agent.start();
    await until("registration", () => stub.registrations[0], WAIT);
    const port = freePort();
    const unknownCommit = "0".repeat(40);
    stub.publish(1, [
      { id: "s1", engine: "vllm", launch: shardLaunch("s1", port, { model: "acme/tiny-llm" }) },
      {
        id: "gated",
        engine: "vllm",
        launch: shardLaunch("gated", freePort(), { model: "acme/gated" }),
      },
      {
        id: "typo",
        engine: "vllm",
        launch: shardLaunch("typo", freePort(), {
          model: "acme/tiny-llm",
          model_commit: unknownCommit,
        }),
      },
    ]);

    const downloading = await until(
      "s1 downloading with its bytes in a heartbeat",
      () =>
        reported(
          stub,
          "s1",
          (s) => s.state === "downloading" && (s.download?.bytes_total ?? 0) > 0,
        ),
      WAIT,
    );
    assertEquals(downloading.download!.model, "acme/tiny-llm");
    assertEquals(downloading.download!.commit, model.refs.main);
    assertEquals(downloading.pid, null, "no engine while downloading");

    const ready = await until(
      "s1 ready",
      () => reported(stub, "s1", (s) => s.state === "ready"),
      WAIT,
    );
    groups.add(ready.pid!);
    assertEquals(ready.download, null, "no download shown once it is done");
    // The cold-start receipt begins with the agent's own download.
    assertOk((ready.cold_start?.download?.bytes ?? 0) > 2 * 10 ** 6, "the receipt's download");
    const snapshot = `${stateDir}/models/models--acme--tiny-llm/snapshots/${model.refs.main}`;
    const argv = procEntries(ready.pid!, "cmdline");
    assertOk(argv.includes(snapshot), `the engine loads the snapshot: ${argv.join(" ")}`);
    assertOk(!argv.includes("acme/tiny-llm"), "the hub id is not the engine's model");
    const env = procEntries(ready.pid!, "environ");
    assertOk(env.includes("HF_HUB_OFFLINE=1"), "the engine runs offline");
    assertOk(env.includes(`HF_HUB_CACHE=${stateDir}/models`));
    assertOk(!env.some((e) => e.startsWith("HF_TOKEN=")), "no token in the engine's environment");
    assertOk(!env.some((e) => e.includes(TOKEN)));
    // Its compile cache directory records its key and last use (agent/engine_cache/).
    const vllmRoot = env.find((e) => e.startsWith("VLLM_CACHE_ROOT="))?.split("=")[1] ?? "";
    const record = parseRecord(
      await Deno.readTextFile(`${vllmRoot.replace(/\/vllm$/, "")}/${RECORD_FILE}`),
    );
    assertEquals(record?.key.model, "acme/tiny-llm");

    const refused = await until(
      "the gated shard failed for good",
      () => reported(stub, "gated", (s) => s.state === "failed"),
      WAIT,
    );
    assertEquals(refused.last_failure?.permanent, true);
    assertStringIncludes(refused.last_failure!.reason, "HF_TOKEN was not granted access");
    const typo = await until(
      "the unknown commit failed for good",
      () => reported(stub, "typo", (s) => s.state === "failed"),
      WAIT,
    );
    assertEquals(typo.last_failure?.permanent, true);
    assertStringIncludes(typo.last_failure!.reason, `revision ${unknownCommit} not found`);

    // Only the agent asked the hub: the engine fetched nothing itself.
    const callers = Object.keys(hub.counters.snapshot().byCaller);
    assertEquals(callers, ["llmgw-agent/0.1.0-test"]);
    // The token is nowhere it could leak.
    assertOk(!logs.some((l) => l.includes(TOKEN)), "no log line holds the token");
    assertOk(!JSON.stringify(stub.heartbeats).includes(TOKEN), "no heartbeat holds it");
    const status = await fetch(`http://127.0.0.1:${agent.localAddr!.port}/v1/status`, {
      headers: { authorization: `Bearer ${LOCAL_TOKEN}` },
    });
    const statusText = await status.text();
    assertEquals(status.status, 200);
    assertStringIncludes(statusText, "HF_TOKEN was not granted access", "it shows the shards");
    assertOk(!statusText.includes(TOKEN), "the agent's local status does not hold it");
    assertOk(logs.some((l) => l.includes("model download: completed")), "the download is logged");
  } finally {
    await agent.stop({ stopEngines: true }).catch(() => {});
    for (const g of groups) {
      try {
        Deno.kill(-g, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    await stub.close();
    await hub.stop();
    await Deno.remove(stateDir, { recursive: true });
  }
});

Deno.test("agent: a hub that cannot be reached keeps the shard downloading with the error, retried until it answers", async () => {
  const model = await syntheticModel({ repo: "acme/tiny-llm", shards: 1, weightBytes: 64 * 1024 });
  const hub = startFakeHub({ repos: [model], tokens: [TOKEN] });
  await hub.offline();
  const stub = new StubControl();
  const stateDir = await Deno.makeTempDir({ prefix: "llmgw_agent_models_" });
  const logs: string[] = [];
  const groups = new Set<number>();
  stub.start();
  const endpoint = `http://127.0.0.1:${hub.ports[0]}`;
  const agent = modelAgent(stub, stateDir, logs, endpoint);
  try {
    await agent.start();
    await until("registration", () => stub.registrations[0], WAIT);
    stub.publish(1, [
      {
        id: "s1",
        engine: "vllm",
        launch: shardLaunch("s1", freePort(), { model: "acme/tiny-llm" }),
      },
    ]);
    const waiting = await until(
      "s1 downloading with its last error",
      () =>
        reported(stub, "s1", (s) => s.state === "downloading" && s.download?.last_error != null),
      WAIT,
    );
    assertStringIncludes(waiting.download!.last_error!, `hub ${endpoint} unreachable`);
    assertOk(waiting.download!.failures >= 1);
    assertEquals(waiting.last_failure, null, "a retryable failure is not the shard's failure");
    hub.listen(); // the same ports again
    const ready = await until(
      "s1 ready",
      () => reported(stub, "s1", (s) => s.state === "ready"),
      WAIT,
    );
    groups.add(ready.pid!);
    assertOk(logs.some((l) => l.includes("model fetch 1 failed")), "the failed try is logged");
  } finally {
    await agent.stop({ stopEngines: true }).catch(() => {});
    for (const g of groups) {
      try {
        Deno.kill(-g, "SIGKILL");
      } catch {
        // Gone.
      }
    }
    await stub.close();
    await hub.stop();
    await Deno.remove(stateDir, { recursive: true });
  }
});
