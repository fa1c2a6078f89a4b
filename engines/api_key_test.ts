import fc from "fast-check";
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import { apiKeyProblems, EngineApiKeyError, scrubKeyArgs, withApiKey } from "./api_key.ts";
import type { LaunchProfile } from "./types.ts";

function profile(o: { args?: string[]; env?: Record<string, string> } = {}): LaunchProfile {
  return {
    name: "p",
    tensor_parallel: 1,
    pipeline_parallel: 1,
    nodes: 1,
    gpus_per_node: 1,
    quantization: "none",
    engine_args: o.args ?? [],
    engine_options: {},
    env: o.env ?? {},
  };
}

Deno.test("a profile that sets the declared key is refused, naming the flag or variable only", () => {
  const byEnv = { key: { env: "ENGINE_KEY" }, also_flags: ["--api-key"] };
  const byFlag = { key: { flag: "--api-key" } };
  const cases: {
    check: Parameters<typeof apiKeyProblems>[2];
    args?: string[];
    env?: Record<string, string>;
    want: string[];
  }[] = [
    { check: byEnv, want: [] },
    { check: byEnv, args: ["--trust-remote-code", "--max-model-len", "4096"], want: [] },
    // Only the declared variable is the key; other variables pass.
    { check: byEnv, env: { HF_HOME: "/m" }, want: [] },
    {
      check: byEnv,
      env: { ENGINE_KEY: "s3cret" },
      want: [
        'profile "p": env ENGINE_KEY is the e API key, which llmgw generates for every shard; remove it from the profile',
      ],
    },
    {
      check: byEnv,
      args: ["--api-key=s3cret"],
      want: [
        'profile "p": engine_args sets --api-key, the e API key, which llmgw generates for every shard; remove it',
      ],
    },
    { check: byFlag, args: ["--api-key", "s3cret"], want: [expectFlag("--api-key")] },
    // argparse abbreviations count; a longer flag that merely starts alike does not.
    { check: byFlag, args: ["--api-k=s3cret"], want: [expectFlag("--api-key")] },
    { check: byFlag, args: ["--admin-api-key", "x", "--api-keys"], want: [] },
    { check: byFlag, args: ["--ap=s3cret"], want: [expectFlag("--api-key")] },
    { check: byFlag, args: ["--a", "-a"], want: [] },
    // The flag form says nothing about the environment.
    { check: byFlag, env: { ENGINE_KEY: "x" }, want: [] },
    // One problem per flag, however often it is given.
    { check: byFlag, args: ["--api-key", "a", "--api-key=b"], want: [expectFlag("--api-key")] },
  ];
  for (const c of cases) {
    assertEquals(
      apiKeyProblems("e", profile({ args: c.args, env: c.env }), c.check),
      c.want,
      JSON.stringify(c),
    );
  }
});

function expectFlag(flag: string): string {
  return `profile "p": engine_args sets ${flag}, the e API key, which llmgw generates for every shard; remove it`;
}

Deno.test("normalize rewrites arguments before matching (vLLM's --api_key)", () => {
  const check = {
    key: { env: "VLLM_API_KEY" },
    also_flags: ["--api-key"],
    normalize: (a: string) => a.replaceAll("_", "-"),
  };
  assertEquals(apiKeyProblems("e", profile({ args: ["--api_key=k"] }), check), [
    expectFlag("--api-key"),
  ]);
});

Deno.test("no problem message ever holds the key the profile set", () => {
  // '#' appears in no message, so a key can never match one by chance.
  const secret = fc.string({ minLength: 1 }).filter((s) => !/[\s=]/.test(s)).map((s) => `#${s}`);
  fc.assert(
    fc.property(secret, fc.constantFrom("--api-key", "--api-key="), (key, spelling) => {
      const args = spelling.endsWith("=") ? [`${spelling}${key}`] : [spelling, key];
      const problems = [
        ...apiKeyProblems("e", profile({ args }), { key: { flag: "--api-key" } }),
        ...apiKeyProblems("e", profile({ env: { K: key } }), { key: { env: "K" } }),
      ];
      assertEquals(problems.length, 2);
      for (const p of problems) assertOk(!p.includes(key), p);
    }),
  );
});

Deno.test("a profile may not set the config_file form's flag or the field as a flag", () => {
  const check = { key: { config_file: { flag: "--config", field: "api-key" } } };
  const fileFlag =
    'profile "p": engine_args sets --config, the file llmgw gives e its API key in; put that file\'s settings in engine_args instead';
  const cases: { args: string[]; want: string[] }[] = [
    { args: [], want: [] },
    { args: ["--config", "mine.yaml"], want: [fileFlag] },
    { args: ["--config=mine.yaml"], want: [fileFlag] },
    // argparse would take the abbreviation for --config (SGLang then ignores the file).
    { args: ["--conf", "mine.yaml"], want: [fileFlag] },
    // The command line beats the file, so --api-key would replace llmgw's key.
    { args: ["--api-key", "s3cret"], want: [expectFlag("--api-key")] },
    { args: ["--api-k=s3cret", "--config", "x.yaml"], want: [expectFlag("--api-key"), fileFlag] },
    // Other flags that merely start alike pass.
    { args: ["--config-file-of-something-else", "x", "--api-keys", "y"], want: [] },
  ];
  for (const c of cases) {
    assertEquals(apiKeyProblems("e", profile({ args: c.args }), check), c.want, c.args.join(" "));
  }
  // The form says nothing about the environment.
  assertEquals(apiKeyProblems("e", profile({ env: { API_KEY: "x" } }), check), []);
});

Deno.test("withApiKey sets the variable or appends the flag, leaving the input alone", () => {
  const command = { argv: ["serve", "--port", "1"], env: { A: "1" } };
  assertEquals(withApiKey(command, { env: "K" }, "k-123", "/shard"), {
    command: { argv: ["serve", "--port", "1"], env: { A: "1", K: "k-123" } },
    file: null,
  });
  assertEquals(withApiKey(command, { flag: "--api-key" }, "k-123", "/shard"), {
    command: { argv: ["serve", "--port", "1", "--api-key", "k-123"], env: { A: "1" } },
    file: null,
  });
  assertEquals(command, { argv: ["serve", "--port", "1"], env: { A: "1" } });
});

Deno.test("withApiKey's config_file form: argv names the file, only the file holds the key", () => {
  const command = { argv: ["serve", "--port", "1"], env: { A: "1" } };
  const key = { config_file: { flag: "--config", field: "api-key" } };
  const keyed = withApiKey(command, key, "k-123", "/state/shards/r1");
  assertEquals(keyed, {
    command: {
      argv: ["serve", "--port", "1", "--config", "/state/shards/r1/engine_key.yaml"],
      env: { A: "1" },
    },
    file: { path: "/state/shards/r1/engine_key.yaml", text: '"api-key": "k-123"\n' },
  });
  assertEquals(command, { argv: ["serve", "--port", "1"], env: { A: "1" } });
  // YAML would read these unquoted as a number, a float, a boolean and null; quoted,
  // they stay strings. A quote or backslash in the key is escaped as YAML reads it.
  const cases: [string, string][] = [
    ["123", '"123"'],
    ["1e5", '"1e5"'],
    ["yes", '"yes"'],
    ["~", '"~"'],
    ['a"b', '"a\\"b"'],
    ["a\\b", '"a\\\\b"'],
    ["#x:y", '"#x:y"'],
  ];
  for (const [secret, quoted] of cases) {
    assertEquals(withApiKey(command, key, secret, "/d").file!.text, `"api-key": ${quoted}\n`);
  }
  // Whatever the key (one starting with `-` is refused, below), the argv is the same
  // (only the path), and the file reads back as the key.
  fc.assert(
    fc.property(fc.stringMatching(/^[\x21-\x2c\x2e-\x7e][\x21-\x7e]{0,63}$/), (secret) => {
      const k = withApiKey(command, key, secret, "/d");
      assertEquals(k.command.argv, [...command.argv, "--config", "/d/engine_key.yaml"]);
      assertEquals(JSON.parse(k.file!.text.slice('"api-key": '.length)), secret);
    }),
  );
});

Deno.test("withApiKey refuses a key that is empty or cannot travel in a Bearer header", () => {
  const command = { argv: ["serve"], env: {} };
  for (const key of [{ env: "K" }, { config_file: { flag: "--config", field: "api-key" } }]) {
    assertThrows(
      () => withApiKey(command, key, "", "/d"),
      EngineApiKeyError,
      "Cannot add engine API key: value is empty",
    );
  }
  // argparse reads `--api-key -x` (and SGLang's file entry, which becomes it) as a missing value.
  for (
    const key of [{ flag: "--api-key" }, { config_file: { flag: "--config", field: "api-key" } }]
  ) {
    assertThrows(
      () => withApiKey(command, key, "-abcdefghijklmnop", "/d"),
      EngineApiKeyError,
      "Cannot add engine API key: it starts with '-', which argparse would read as an option",
    );
  }
  // A variable takes it as it is.
  assertEquals(withApiKey(command, { env: "K" }, "-abc", "/d").command.env, { K: "-abc" });
  for (const bad of ["a b", "a\nb", "ключ", "a\tb"]) {
    assertThrows(
      () => withApiKey(command, { flag: "--api-key" }, bad, "/d"),
      EngineApiKeyError,
      "visible ASCII",
    );
  }
});

Deno.test("scrubKeyArgs hides the values of known key flags in any spelling, and nothing else", () => {
  const cases: [string[], string[]][] = [
    [["vllm", "serve", "m", "--port", "1"], ["vllm", "serve", "m", "--port", "1"]],
    [["sglang", "--api-key", "k1", "--port", "1"], ["sglang", "--api-key", "***", "--port", "1"]],
    // vLLM takes several keys after one flag.
    [["vllm", "--api-key", "k1", "k2", "--port", "1"], [
      "vllm",
      "--api-key",
      "***",
      "***",
      "--port",
      "1",
    ]],
    [["x", "--api-key=k1", "k2"], ["x", "--api-key=***", "k2"]],
    [["x", "--api_key", "k1"], ["x", "--api_key", "***"]],
    [["x", "--admin-api-key", "a1", "--api-k=k1"], ["x", "--admin-api-key", "***", "--api-k=***"]],
    // Flags that merely start alike, and a key flag at the end, change nothing.
    [["x", "--api-keys", "v", "--apikey", "v", "--api-key"], [
      "x",
      "--api-keys",
      "v",
      "--apikey",
      "v",
      "--api-key",
    ]],
    // vLLM's Hugging Face token: one value, or none (the stored login).
    [["vllm", "serve", "--hf-token", "hf_x", "m"], ["vllm", "serve", "--hf-token", "***", "m"]],
    [["vllm", "--hf_token=hf_x", "--hf-token", "--port", "1"], [
      "vllm",
      "--hf_token=***",
      "--hf-token",
      "--port",
      "1",
    ]],
    // A whole command in one argument (Ray's workers: sh -c "…"), its spacing kept.
    [["sh", "-c", "vllm serve m --api-key k1 k2  --hf-token=hf_x --port 1"], [
      "sh",
      "-c",
      "vllm serve m --api-key *** ***  --hf-token=*** --port 1",
    ]],
    [["sh", "-c", "exec sglang --admin_api_key\ta1\n"], [
      "sh",
      "-c",
      "exec sglang --admin_api_key\t***\n",
    ]],
    // A value with a space is one value.
    [["x", "--api-key", "a b", "m"], ["x", "--api-key", "***", "***"]],
  ];
  for (const [argv, want] of cases) assertEquals(scrubKeyArgs(argv), want, argv.join(" "));
});
