import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { agentModelOptions } from "./agent_model_flags.ts";
import { UsageError } from "./usage_error.ts";
import { AgentConfigError, parseAgentConfig } from "../agent/config.ts";
import { assertThrows } from "../tests/assert.ts";

const noEnv = () => undefined;

Deno.test("agent model flags: defaults under the state directory, the public hub, no token", async () => {
  const o = await agentModelOptions({}, {}, "/var/lib/llmgw/agent", noEnv);
  assertEquals(o.cache, {
    root: "/var/lib/llmgw/agent/models",
    rateBytesPerSecond: null,
    watermarks: { highPercent: 90, lowPercent: 80 },
  });
  assertEquals(o.hub, { endpoint: "https://huggingface.co" });
});

Deno.test("agent model flags: flags over the config file; the hub and token from the environment", async () => {
  const env: Record<string, string> = {
    HF_ENDPOINT: "http://mirror.lan:8080/",
    HF_TOKEN: "hf_secret_abcdefgh",
  };
  const o = await agentModelOptions(
    { "download-rate": "100MB/s", "cache-low": "70" },
    { model_cache: "/models", download_rate: "1GB/s", cache_high: 95, cache_low: 60 },
    "/state",
    (n) => env[n],
  );
  assertEquals(o.cache, {
    root: "/models",
    rateBytesPerSecond: 100e6,
    watermarks: { highPercent: 95, lowPercent: 70 },
  });
  assertEquals(o.hub.endpoint, "http://mirror.lan:8080");
  assertOk(o.hub.token?.occursIn("hf_secret_abcdefgh"));
  // The options, printed or logged, never show it.
  assertOk(!JSON.stringify(o).includes("hf_secret"));
});

Deno.test("agent model flags: mistakes are usage errors naming the flag, key or file", async () => {
  await assertRejects(
    () => agentModelOptions({ "download-rate": "fast" }, {}, "/s", noEnv),
    UsageError,
    "--download-rate",
  );
  await assertRejects(
    () => agentModelOptions({ "cache-high": "120%" }, {}, "/s", noEnv),
    UsageError,
    "--cache-high",
  );
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/token`;
    Deno.writeTextFileSync(file, "hf_x_0123456789");
    Deno.chmodSync(file, 0o644);
    const e = await assertRejects(
      () => agentModelOptions({}, { hf_token_file: file }, "/s", noEnv),
      UsageError,
      `token file ${file}: its mode is 0644`,
    );
    assertOk(!e.message.includes("hf_x_0123456789"));
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
  await assertRejects(
    () => agentModelOptions({}, {}, "/s", (n) => n === "HF_ENDPOINT" ? "ftp://x" : undefined),
    UsageError,
    "HF_ENDPOINT",
  );
});

Deno.test("agent config: the model cache keys are checked where they are written", () => {
  assertThrows(
    () => parseAgentConfig(JSON.stringify({ download_rate: "lots" }), "agent.json"),
    AgentConfigError,
    "agent.json download_rate",
  );
  assertThrows(
    () => parseAgentConfig(JSON.stringify({ cache_low: 0 }), "agent.json"),
    AgentConfigError,
    "agent.json cache_low",
  );
  const c = parseAgentConfig(
    JSON.stringify({ model_cache: "m", hf_token_file: "t", cache_high: "85%" }),
    "a.json",
  );
  assertEquals([c.model_cache, c.hf_token_file, c.cache_high], ["m", "t", "85%"]);
});
