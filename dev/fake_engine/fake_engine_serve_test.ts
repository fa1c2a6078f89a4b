/**
 * Tests of a fake engine process's life (dev/fake_engine/fake_engine_serve.ts), as
 * real processes started through the shims: readiness of each engine and
 * rank, the crash knobs, the worker and the process group, signals, and the
 * startup failures (a taken port, too few visible GPUs).
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { until } from "../../tests/until.ts";
import { isAlive, processes, survivorsAfter } from "../../tests/proc_probe.ts";
import { vllmPlugin } from "../../engines/vllm.ts";
import { sglangPlugin } from "../../engines/sglang.ts";
import {
  barFragments,
  freePort,
  launch,
  POLL,
  SGLANG_PROGRESS,
  sglangArgv,
  VLLM_PROGRESS,
  vllmArgv,
  withEngine,
} from "../../tests/fake_engine_harness.ts";

// ---------------------------------------------------------------------------
// Real processes through the shims

Deno.test("vLLM: port closed while loading, progress lines on stderr, then ready", async () => {
  const port = freePort();
  await withEngine(vllmArgv(port), { FAKE_ENGINE_LOAD_SECONDS: "1.5" }, port, async (e) => {
    const res = await until("/health 200", async () => {
      // Snapshot the log before probing: an answer must come after the last shard loaded.
      const before = e.err;
      const r = await e.request("/health");
      if (r === null) return undefined;
      assertStringIncludes(
        e.err,
        "100% Completed | 4/4",
        `answered before loading finished; stderr before: ${before}`,
      );
      return r;
    }, POLL);
    assertEquals([res.status, res.body], [200, ""]);
    const bars = barFragments(e.err);
    assertEquals(bars.length, 5, bars.join("\n"));
    bars.forEach((line, i) => {
      const g = VLLM_PROGRESS[0].exec(line)?.groups;
      assertOk(g !== undefined, `${line} must match VLLM_LOADING_PROGRESS`);
      assertEquals([g.percent, g.done, g.total], [String(i * 25), String(i), "4"]);
    });
    // tqdm redraws with \r, after the worker prefix.
    assertOk(
      /\(EngineCore_DP0 pid=\d+\) \rLoading safetensors checkpoint shards: {3}0% Completed/.test(
        e.err,
      ),
      e.err,
    );
    assertStringIncludes(e.out, "INFO ");
    assertStringIncludes(e.out, "[api_server.py:1896] vLLM API server version 0.11.1");
    assertStringIncludes(e.err, "INFO:     Application startup complete.");
    const models = await e.request("/v1/models");
    assertEquals(models?.status, 200);
    const list = JSON.parse(models!.body);
    assertEquals(list.object, "list");
    assertEquals(
      list.data.map((
        m: { id: string; object: string; owned_by: string; max_model_len: number },
      ) => [m.id, m.object, m.owned_by, m.max_model_len]),
      [["fake-model", "model", "vllm", 32768]],
    );
    Deno.kill(e.pid, "SIGTERM");
    assertEquals((await e.exit()).code, 0);
    assertStringIncludes(e.out, "Shutting down FastAPI HTTP server.");
  });
});

Deno.test("vLLM: FAKE_ENGINE_NEVER_READY keeps the port closed while the process lives", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_NEVER_READY: "1", FAKE_ENGINE_PROGRESS: "lines" },
    port,
    async (e) => {
      await e.waitForLog("FAKE_ENGINE_NEVER_READY=1");
      const bar = e.err.split("\n").find((l) => l.includes("checkpoint shards"));
      assertOk(bar !== undefined && VLLM_PROGRESS[0].test(bar), e.err);
      for (let i = 0; i < 5; i++) {
        assertEquals(await e.request("/health"), null, "the port must refuse while loading");
        // Not a condition wait: the port must stay closed over a stretch of time.
        await new Promise((r) => setTimeout(r, 50));
      }
      assertOk(isAlive(e.pid));
    },
  );
});

Deno.test("SGLang: /v1/models 200 at once, /health 503 until loaded and warm, then 200", async () => {
  const port = freePort();
  await withEngine(sglangArgv(port), { FAKE_ENGINE_LOAD_SECONDS: "1.5" }, port, async (e) => {
    const models = await until(
      "/v1/models",
      () => e.request("/v1/models").then((r) => r ?? undefined),
      POLL,
    );
    assertEquals(models.status, 200);
    assertEquals(JSON.parse(models.body).data[0].id, "fake-model");
    const health = await until("/health 200", async () => {
      const r = await e.request("/health");
      assertOk(r !== null, "SGLang's port closed after it opened");
      if (r.status === 503) return undefined;
      return r;
    }, POLL);
    assertEquals(health.status, 200);
    assertStringIncludes(e.err, "The server is fired up and ready to roll!");
    assertEquals((await e.request("/health_generate"))?.status, 200);
    const bars = barFragments(e.err);
    assertEquals(bars.length, 5, bars.join("\n"));
    for (const line of bars) assertOk(SGLANG_PROGRESS.every((re) => re.test(line)), line);
    Deno.kill(e.pid, "SIGTERM");
    assertEquals((await e.exit()).code, 0);
  });
});

Deno.test("SGLang: while never ready, /health and /health_generate 503, /v1/models 200, completions 503", async () => {
  const port = freePort();
  await withEngine(sglangArgv(port), { FAKE_ENGINE_NEVER_READY: "1" }, port, async (e) => {
    await e.waitForLog("FAKE_ENGINE_NEVER_READY=1");
    await until("port open", () => e.request("/v1/models").then((r) => r ?? undefined), POLL);
    assertEquals((await e.request("/health"))?.status, 503);
    assertEquals((await e.request("/health_generate"))?.status, 503);
    assertEquals((await e.request("/v1/models"))?.status, 200);
    const chat = await e.post("/v1/chat/completions", {
      model: "fake-model",
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(chat?.status, 503);
  });
});

Deno.test("FAKE_ENGINE_CRASH_AFTER_REQUESTS exits 1 after that many completions", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_CRASH_AFTER_REQUESTS: "2" },
    port,
    async (e) => {
      await e.waitHealthy();
      for (let i = 0; i < 2; i++) {
        const r = await e.post("/v1/completions", { model: "fake-model", prompt: "x" });
        assertEquals(r?.status, 200, `completion ${i + 1} must be answered`);
      }
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(
        e.out,
        "RuntimeError: CUDA error: an illegal memory access was encountered",
      );
      assertStringIncludes(e.out, "EngineDeadError");
    },
  );
});

Deno.test("FAKE_ENGINE_CRASH_AFTER_SECONDS exits 1 with a CUDA error, even while loading", async () => {
  const port = freePort();
  await withEngine(
    sglangArgv(port),
    { FAKE_ENGINE_NEVER_READY: "1", FAKE_ENGINE_CRASH_AFTER_SECONDS: "0.3" },
    port,
    async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(
        e.err,
        "TP0] RuntimeError: CUDA error: an illegal memory access was encountered",
      );
    },
  );
});

Deno.test("FAKE_ENGINE_WORKER: the worker shares the group, outlives a SIGKILLed leader, dies with the group", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_WORKER: "1", FAKE_ENGINE_LOAD_SECONDS: "0" },
    port,
    async (e) => {
      const worker = Number(
        await until("worker pid", () => /worker pid (\d+)/.exec(e.out)?.[1], POLL),
      );
      await e.waitForLog("fake VLLM::EngineCore worker started");
      const procs = processes();
      assertEquals(procs.get(e.pid)?.pgrp, e.pid, "the engine leads its own group (detached)");
      assertEquals([procs.get(worker)?.ppid, procs.get(worker)?.pgrp], [e.pid, e.pid]);
      // SIGKILL on the leader alone leaves the worker, as with vLLM's EngineCore.
      Deno.kill(e.pid, "SIGKILL");
      assertEquals((await e.exit()).signal, "SIGKILL");
      assertOk(isAlive(worker), "the worker must survive its leader's SIGKILL");
      assertEquals(processes().get(worker)?.pgrp, e.pid);
      Deno.kill(-e.pid, "SIGKILL");
      assertEquals(await survivorsAfter([e.pid, worker], [e.pid], 10_000), []);
    },
  );
});

Deno.test("SIGTERM to the group: a clean exit 0 of leader and worker", async () => {
  const port = freePort();
  await withEngine(
    sglangArgv(port),
    { FAKE_ENGINE_WORKER: "1", FAKE_ENGINE_LOAD_SECONDS: "0" },
    port,
    async (e) => {
      await e.waitForLog("fake sglang::scheduler_TP0 worker started");
      await e.waitForLog("ready to roll");
      Deno.kill(-e.pid, "SIGTERM");
      assertEquals((await e.exit()).code, 0);
      assertEquals(await survivorsAfter([e.pid], [e.pid], 10_000), []);
    },
  );
});

Deno.test("FAKE_ENGINE_IGNORE_SIGTERM: the group survives SIGTERM, only SIGKILL ends it", async () => {
  const port = freePort();
  await withEngine(
    vllmArgv(port),
    { FAKE_ENGINE_WORKER: "1", FAKE_ENGINE_IGNORE_SIGTERM: "1", FAKE_ENGINE_LOAD_SECONDS: "0" },
    port,
    async (e) => {
      const worker = Number(
        await until("worker pid", () => /worker pid (\d+)/.exec(e.out)?.[1], POLL),
      );
      await e.waitForLog("fake VLLM::EngineCore worker started");
      Deno.kill(-e.pid, "SIGTERM");
      await e.waitForLog("ignoring SIGTERM (FAKE_ENGINE_IGNORE_SIGTERM=1)");
      await e.waitForLog("fake worker ignoring SIGTERM");
      assertOk(isAlive(e.pid) && isAlive(worker));
      Deno.kill(-e.pid, "SIGKILL");
      assertEquals((await e.exit()).signal, "SIGKILL");
      assertEquals(await survivorsAfter([e.pid, worker], [e.pid], 10_000), []);
    },
  );
});

Deno.test("plugin-built commands run as is: vLLM headless rank never listens, SGLang rank 1 serves a dummy /health", async () => {
  // vLLM multi-node rank 1 (mp): --headless, no HTTP ever.
  const p1 = freePort();
  const vCmd = vllmPlugin.command(launch({ port: p1, tp: 2, nodes: 2, rank: 1 }));
  assertOk(vCmd.argv.includes("--headless"));
  await withEngine(vCmd.argv, { ...vCmd.env, FAKE_ENGINE_LOAD_SECONDS: "0" }, p1, async (e) => {
    await e.waitForLog("headless rank 1 loaded; serving no HTTP");
    assertEquals(await e.request("/health"), null);
    assertEquals(barFragments(e.err), [], "only global rank 0 shows tqdm bars");
    assertOk(isAlive(e.pid));
    assertStringIncludes(e.out, "VLLM_HOST_IP=127.0.0.1");
  });
  // SGLang rank 1: nothing until loaded, then /health 200 and no API.
  const p2 = freePort();
  const sCmd = sglangPlugin.command(launch({ port: p2, tp: 2, nodes: 2, rank: 1 }));
  await withEngine(sCmd.argv, { FAKE_ENGINE_LOAD_SECONDS: "0.5" }, p2, async (e) => {
    const h = await until(
      "dummy /health",
      () => e.request("/health").then((r) => r ?? undefined),
      POLL,
    );
    assertEquals(h.status, 200);
    assertStringIncludes(e.err, "Load weight end.");
    assertEquals((await e.request("/v1/models"))?.status, 404);
  });
  // Rank 0 of each, single node, on 0.0.0.0 as the plugins ask.
  for (const plugin of [vllmPlugin, sglangPlugin]) {
    const port = freePort();
    const cmd = plugin.command(launch({ port, tp: 1 }));
    await withEngine(cmd.argv, { FAKE_ENGINE_LOAD_SECONDS: "0" }, port, async (e) => {
      const probes = plugin.probes(launch({ port }));
      for (const check of probes.readiness) {
        const r = await until(`${plugin.name} ${check.path}`, async () => {
          const r = await e.request(check.path);
          return r?.status === check.expect_status ? r : undefined;
        }, POLL);
        if (check.lists_model !== undefined) {
          assertOk(JSON.parse(r.body).data.some((m: { id: string }) => m.id === check.lists_model));
        }
      }
    });
  }
});

Deno.test("a taken port or too few visible GPUs exit 1 with the engine's error", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  try {
    await withEngine(vllmArgv(port), { FAKE_ENGINE_LOAD_SECONDS: "0" }, port, async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(e.out, "address already in use");
    });
  } finally {
    listener.close();
  }
  const p = freePort();
  await withEngine(
    ["vllm", "serve", "org/fake-model-8b", "--host", "127.0.0.1", "--port", String(p), "-tp", "2"],
    { FAKE_ENGINE_LOAD_SECONDS: "0", CUDA_VISIBLE_DEVICES: "3" },
    p,
    async (e) => {
      assertEquals((await e.exit()).code, 1);
      assertStringIncludes(e.out, "needs 2 GPU(s)");
    },
  );
});
