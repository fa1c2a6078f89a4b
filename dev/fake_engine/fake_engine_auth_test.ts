/**
 * Tests of the fake engine's API keys (dev/fake_engine/fake_engine_auth.ts; engine
 * reference §6): where each engine reads them from, the routes it checks and
 * the headers it takes, and, as real processes started through the shims,
 * that the key is needed where the engine needs it and never logged.
 */
import fc from "fast-check";
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { vllmPlugin } from "../../engines/vllm.ts";
import { sglangPlugin } from "../../engines/sglang.ts";
import { withApiKey } from "../../engines/api_key.ts";
import { apiKeyAllows, SGLANG_OPEN_PREFIXES, VLLM_GUARDED_PREFIXES } from "./fake_engine_auth.ts";
import { parseCommandLine } from "./fake_engine_command.ts";
import {
  type Engine,
  freePort,
  launch,
  sglangArgv,
  vllmArgv,
  withEngine,
} from "../../tests/fake_engine_harness.ts";

// ---------------------------------------------------------------------------
// API keys (engine reference §6), no processes

Deno.test("API keys: where each engine reads them from", () => {
  const keys = (argv: string[], env: Record<string, string> = {}) => {
    const c = parseCommandLine(argv, (k) => env[k]);
    assertOk(c.kind === "serve", argv.join(" "));
    return [c.config.api_keys, c.config.api_key_source];
  };
  const v = ["vllm", "serve", "m"];
  assertEquals(keys(v), [[], null]);
  assertEquals(keys(v, { VLLM_API_KEY: "e" }), [["e"], "VLLM_API_KEY"]);
  assertEquals(keys(v, { VLLM_API_KEY: "" }), [[], null]);
  // --api-key takes several keys (nargs="+") and hides the variable.
  assertEquals(keys([...v, "--api-key", "a", "b"], { VLLM_API_KEY: "e" }), [
    ["a", "b"],
    "--api-key",
  ]);
  assertEquals(keys([...v, "--api_key=a"]), [["a"], "--api-key"]);
  // Even an empty --api-key hides the variable: vLLM then checks nothing.
  assertEquals(keys([...v, "--api-key", ""], { VLLM_API_KEY: "e" }), [[], null]);
  const s = ["sglang", "--model-path", "m"];
  assertEquals(keys([...s, "--api-key", "k"]), [["k"], "--api-key"]);
  // SGLang's --config file is dev/fake_engine/fake_engine_config_file_test.ts's.
  // SGLang reads no key from its environment; an empty flag is no key.
  assertEquals(keys(s, { SGLANG_API_KEY: "e", VLLM_API_KEY: "e" }), [[], null]);
  assertEquals(keys([...s, "--api-key="]), [[], null]);
});

Deno.test("API keys: the routes each engine checks and the headers it takes", () => {
  const h = (o: Record<string, string> = {}) => new Headers(o);
  const K = "k-1";
  const ok = h({ authorization: `Bearer ${K}` });
  const cases: [
    "vllm" | "sglang",
    string,
    string,
    Headers,
    boolean,
  ][] = [
    // vLLM: /v1, /v2, /inference, /cohere, as prefixes (so /v1x too).
    ["vllm", "POST", "/v1/chat/completions", h(), false],
    ["vllm", "POST", "/v1/chat/completions", ok, true],
    ["vllm", "GET", "/v1/models", h(), false],
    ["vllm", "GET", "/v1nothing", h(), false],
    ["vllm", "POST", "/v2/rerank", h(), false],
    ["vllm", "POST", "/inference/v1/generate", h(), false],
    ["vllm", "POST", "/cohere/v2/chat", h(), false],
    ["vllm", "GET", "/health", h(), true],
    ["vllm", "GET", "/metrics", h(), true],
    ["vllm", "GET", "/version", h(), true],
    ["vllm", "POST", "/invocations", h(), true],
    ["vllm", "POST", "/tokenize", h(), true],
    ["vllm", "OPTIONS", "/v1/models", h(), true],
    ["vllm", "GET", "/v1/models", h({ authorization: `bearer ${K}` }), true],
    ["vllm", "GET", "/v1/models", h({ authorization: `Bearer  ${K}` }), false],
    ["vllm", "GET", "/v1/models", h({ authorization: `Basic ${K}` }), false],
    ["vllm", "GET", "/v1/models", h({ authorization: K }), false],
    ["vllm", "GET", "/v1/models", h({ authorization: "Bearer k-2" }), false],
    ["vllm", "GET", "/v1/models", h({ "x-api-key": K }), false],
    // SGLang: everything but /health*, /ready*, /metrics*.
    ["sglang", "POST", "/v1/chat/completions", h(), false],
    ["sglang", "POST", "/v1/chat/completions", ok, true],
    ["sglang", "GET", "/v1/models", h(), false],
    ["sglang", "GET", "/get_model_info", h(), false],
    ["sglang", "GET", "/nowhere", h(), false],
    ["sglang", "GET", "/health", h(), true],
    ["sglang", "GET", "/health_generate", h(), true],
    ["sglang", "GET", "/ready", h(), true],
    ["sglang", "GET", "/metrics", h(), true],
    ["sglang", "OPTIONS", "/v1/models", h(), true],
    ["sglang", "GET", "/v1/models", h({ authorization: `BEARER ${K}` }), true],
    ["sglang", "GET", "/v1/models", h({ "x-api-key": K }), true],
    ["sglang", "GET", "/v1/models", h({ "x-api-key": "" }), false],
    ["sglang", "GET", "/v1/models", h({ authorization: `Token ${K}` }), false],
  ];
  for (const [engine, method, path, headers, want] of cases) {
    assertEquals(
      apiKeyAllows(engine, [K], method, path, headers),
      want,
      `${engine} ${method} ${path} ${JSON.stringify([...headers])}`,
    );
    // Without keys, nothing is checked.
    assertEquals(apiKeyAllows(engine, [], method, path, headers), true);
  }
  // vLLM takes any of its keys; SGLang has one.
  assertEquals(apiKeyAllows("vllm", ["a", K], "GET", "/v1/models", ok), true);
});

Deno.test("API keys: the key opens every route, any other credential none that is checked", () => {
  const key = fc.stringMatching(/^[\x21-\x7e]{1,64}$/);
  const path = fc.oneof(
    fc.constantFrom(...VLLM_GUARDED_PREFIXES, ...SGLANG_OPEN_PREFIXES, "/", "/x"),
    fc.webPath(),
  );
  fc.assert(
    fc.property(
      fc.constantFrom("vllm" as const, "sglang" as const),
      key,
      key,
      path,
      (engine, k, other, p) => {
        const bearer = (v: string) => new Headers({ authorization: `Bearer ${v}` });
        assertOk(apiKeyAllows(engine, [k], "POST", p, bearer(k)));
        const checked = engine === "vllm"
          ? VLLM_GUARDED_PREFIXES.some((g) => p.startsWith(g))
          : !SGLANG_OPEN_PREFIXES.some((o) => p.startsWith(o));
        assertEquals(apiKeyAllows(engine, [k], "POST", p, new Headers()), !checked);
        if (other !== k) {
          assertEquals(apiKeyAllows(engine, [k], "POST", p, bearer(other)), !checked);
        }
      },
    ),
  );
});

/** A random engine API key, as the supervisor would make one. */
function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return `ek-${btoa(String.fromCharCode(...bytes)).replace(/[+/=]/g, "x")}`;
}

/** What a request to a fake engine answers, as [status, body]. */
async function answer(
  e: Engine,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<[number, string] | null> {
  const r = await e.request(path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return r === null ? null : [r.status, r.body];
}

const CHAT = { model: "fake-model", messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
const UNAUTHORIZED: [number, string] = [401, '{"error":"Unauthorized"}'];

Deno.test("vLLM with VLLM_API_KEY: /v1 needs the key, /health, /metrics and the rest stay open, the key is never logged", async () => {
  const port = freePort();
  const key = randomKey();
  const { command: cmd } = withApiKey(
    vllmPlugin.command(launch({ port })),
    vllmPlugin.api_key!,
    key,
    "/nowhere",
  );
  assertOk(!cmd.argv.includes(key), "vLLM takes its key from the environment, never argv");
  await withEngine(cmd.argv, { ...cmd.env, FAKE_ENGINE_LOAD_SECONDS: "0" }, port, async (e) => {
    await e.waitHealthy();
    const auth = { authorization: `Bearer ${key}` };
    assertEquals(await answer(e, "/v1/chat/completions", {}, CHAT), UNAUTHORIZED);
    assertEquals(await answer(e, "/v1/models"), UNAUTHORIZED);
    assertEquals(await answer(e, "/v1/models", { authorization: "Bearer wrong" }), UNAUTHORIZED);
    // The middleware runs before routing: unknown paths under /v1 are 401 too.
    assertEquals(await answer(e, "/v1/nowhere"), UNAUTHORIZED);
    assertEquals((await answer(e, "/v1/nowhere", auth))?.[0], 404);
    const chat = await answer(e, "/v1/chat/completions", auth, CHAT);
    assertEquals(chat?.[0], 200);
    assertEquals(JSON.parse(chat![1]).object, "chat.completion");
    assertEquals((await answer(e, "/v1/models", auth))?.[0], 200);
    for (const open of ["/health", "/metrics", "/version", "/ping"]) {
      assertEquals((await answer(e, open))?.[0], 200, open);
    }
    assertEquals((await answer(e, "/nowhere"))?.[0], 404);
    await e.waitForLog('"POST /v1/chat/completions HTTP/1.1" 200');
    assertStringIncludes(e.log, '"GET /v1/models HTTP/1.1" 401');
    assertStringIncludes(
      e.log,
      "API key required (1 from VLLM_API_KEY) on paths starting with /v1",
    );
    assertOk(!e.log.includes(key), "the key must not appear in the fake's output");
  });
});

Deno.test("vLLM with --api-key: any of its keys, never logged, and 'api_key': '***' in non-default args", async () => {
  const port = freePort();
  const [k1, k2] = [randomKey(), randomKey()];
  await withEngine(
    vllmArgv(port, ["--api-key", k1, k2]),
    { FAKE_ENGINE_LOAD_SECONDS: "0", VLLM_API_KEY: "ignored-when-the-flag-is-given" },
    port,
    async (e) => {
      await e.waitHealthy();
      for (const k of [k1, k2]) {
        assertEquals((await answer(e, "/v1/models", { authorization: `Bearer ${k}` }))?.[0], 200);
      }
      assertEquals(
        await answer(e, "/v1/models", { authorization: "Bearer ignored-when-the-flag-is-given" }),
        UNAUTHORIZED,
      );
      assertStringIncludes(e.out, "'api_key': '***'");
      assertStringIncludes(e.out, "--api-key *** ***");
      for (const k of [k1, k2, "ignored-when-the-flag-is-given"]) {
        assertOk(!e.log.includes(k), `${k} must not appear in the fake's output`);
      }
    },
  );
});

Deno.test("SGLang with --api-key: all but /health and /metrics need the key, Bearer or x-api-key; never logged", async () => {
  const port = freePort();
  const key = randomKey();
  await withEngine(
    sglangArgv(port, ["--api-key", key]),
    { FAKE_ENGINE_LOAD_SECONDS: "0" },
    port,
    async (e) => {
      // /health answers without a key, 503 while warming up, then 200.
      await e.waitHealthy();
      assertEquals((await answer(e, "/health_generate"))?.[0], 200);
      assertEquals((await answer(e, "/metrics"))?.[0], 200);
      for (const path of ["/v1/models", "/get_model_info", "/nowhere"]) {
        assertEquals(await answer(e, path), UNAUTHORIZED, path);
      }
      assertEquals(await answer(e, "/v1/chat/completions", {}, CHAT), UNAUTHORIZED);
      const credentials: Record<string, string>[] = [
        { authorization: `Bearer ${key}` },
        { "x-api-key": key },
      ];
      for (const auth of credentials) {
        assertEquals((await answer(e, "/v1/chat/completions", auth, CHAT))?.[0], 200);
        assertEquals((await answer(e, "/v1/models", auth))?.[0], 200);
      }
      assertEquals((await answer(e, "/nowhere", { authorization: `Bearer ${key}` }))?.[0], 404);
      await e.waitForLog('"POST /v1/chat/completions HTTP/1.1" 200');
      assertStringIncludes(e.log, "API key required (1 from --api-key) on every path but");
      assertOk(!e.log.includes(key), "the key must not appear in the fake's output");
    },
  );
});

Deno.test("SGLang as llmgw starts it: the key in its --config file, not in argv, and required", async () => {
  const port = freePort();
  const key = randomKey();
  const dir = await Deno.makeTempDir({ prefix: "llmgw_fake_auth_" });
  try {
    const keyed = withApiKey(
      sglangPlugin.command(launch({ port })),
      sglangPlugin.api_key!,
      key,
      dir,
    );
    assertEquals(keyed.command.argv.slice(-2), ["--config", `${dir}/engine_key.yaml`]);
    Deno.writeTextFileSync(keyed.file!.path, keyed.file!.text, { mode: 0o600 });
    await withEngine(
      keyed.command.argv,
      { ...keyed.command.env, FAKE_ENGINE_LOAD_SECONDS: "0" },
      port,
      async (e) => {
        await e.waitHealthy();
        const cmdline = Deno.readTextFileSync(`/proc/${e.pid}/cmdline`).split("\0");
        assertOk(cmdline.includes("--config"), cmdline.join(" "));
        assertOk(!cmdline.some((a) => a.includes(key)), "the key must not be in the argv");
        assertEquals(await answer(e, "/v1/models"), UNAUTHORIZED);
        assertEquals(
          await answer(e, "/v1/models", { authorization: "Bearer wrong" }),
          UNAUTHORIZED,
        );
        assertEquals((await answer(e, "/v1/models", { authorization: `Bearer ${key}` }))?.[0], 200);
        assertStringIncludes(e.log, "API key required (1 from --config) on every path but");
        assertOk(!e.log.includes(key), "the key must not appear in the fake's output");
      },
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("FAKE_ENGINE_LEAK_API_KEY=1 prints the key where the real engines do, to test scrubbing", async () => {
  const port = freePort();
  const key = randomKey();
  await withEngine(
    sglangArgv(port, ["--api-key", key]),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_LEAK_API_KEY: "1" },
    port,
    async (e) => {
      await e.waitForLog("server_args=ServerArgs(");
      assertStringIncludes(e.err, `api_key='${key}')`);
      // The fake's own argv line stays redacted.
      assertStringIncludes(e.err, "--api-key ***");
    },
  );
  const vPort = freePort();
  await withEngine(
    vllmArgv(vPort, ["--api-key", key]),
    { FAKE_ENGINE_LOAD_SECONDS: "0", FAKE_ENGINE_LEAK_API_KEY: "1" },
    vPort,
    async (e) => {
      await e.waitForLog("non-default args:");
      assertStringIncludes(e.out, `'api_key': ['${key}']`);
    },
  );
});
