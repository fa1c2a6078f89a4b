/**
 * Tests of the fake SGLang's `--config FILE` (dev/fake_engine/fake_engine_config_file.ts;
 * engine reference §6.2): the file merged before the command line, SGLang's
 * own refusals with its messages, the fake's stricter ones, and, as a real
 * process, the traceback and exit status of a refusal.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { type Engine, freePort, sglangArgv, withEngine } from "../../tests/fake_engine_harness.ts";
import { UsageError } from "./fake_engine_argparse.ts";
import { ConfigError, type EngineConfig, parseCommandLine } from "./fake_engine_command.ts";
import { type ConfigFiles, FakeConfigFileError } from "./fake_engine_config_file.ts";

const BASE = ["sglang", "--model-path", "m", "--port", "8000"];

/** Files in memory: path → text, or an error `read` throws. */
function files(map: Record<string, string | Error>): ConfigFiles {
  return {
    exists: (p) => Object.hasOwn(map, p),
    read: (p) => {
      const f = map[p];
      if (f instanceof Error) throw f;
      if (f === undefined) throw new Deno.errors.NotFound(p);
      return f;
    },
  };
}

function parse(
  args: string[],
  map: Record<string, string | Error>,
  version = "0.5.3",
): EngineConfig {
  const c = parseCommandLine([...BASE, ...args], (k) => {
    return k === "FAKE_ENGINE_VERSION" ? version : undefined;
  }, files(map));
  assertOk(c.kind === "serve");
  return c.config;
}

/** What parsing throws, as [class name, message]. */
function refusal(
  args: string[],
  map: Record<string, string | Error>,
  version = "0.5.3",
): [string, string] {
  try {
    parse(args, map, version);
  } catch (e) {
    if (e instanceof ConfigError) return [`${e.type}`, e.message];
    if (e instanceof UsageError || e instanceof FakeConfigFileError) return [e.name, e.message];
    throw e;
  }
  throw new Error(`expected ${args.join(" ")} to be refused`);
}

Deno.test("the file's values come first and the command line wins; argv keeps only --config PATH", () => {
  const key = { "/s/k.yaml": '"api-key": "k-1"\n' };
  const c = parse(["--config", "/s/k.yaml"], key);
  assertEquals([c.api_keys, c.api_key_source], [["k-1"], "--config"]);
  // The command line after (or before) --config beats the file.
  const both = { "/s/k.yaml": '"api-key": "from-file"\n"port": "9000"\nenable-metrics: true\n' };
  const cli = parse(["--config", "/s/k.yaml", "--api-key", "from-cli"], both);
  assertEquals([cli.api_keys, cli.api_key_source, cli.port, cli.metrics], [
    ["from-cli"],
    "--api-key",
    8000,
    true,
  ]);
  assertEquals(parse(["--api-key", "a", "--config", "/s/k.yaml"], both).api_keys, ["a"]);
  // store_true: true is the bare flag, false nothing; an empty file or comments: no values.
  assertEquals(
    parse(["--config", "/s/f.yml"], { "/s/f.yml": "enable-metrics: false\n" }).metrics,
    false,
  );
  assertEquals(parse(["--config", "/s/e.YAML"], { "/s/e.YAML": "# nothing\n\n" }).api_keys, []);
  // Escapes as YAML reads them; a key that YAML would read as a number stays a string quoted.
  assertEquals(
    parse(["--config", "/s/q.yaml"], { "/s/q.yaml": '"api-key": "a\\"b\\\\c"\n' }).api_keys,
    ['a"b\\c'],
  );
  assertEquals(parse(["--config", "/s/n.yaml"], { "/s/n.yaml": 'api-key: "123"\n' }).api_keys, [
    "123",
  ]);
  // SGLang looks a key's action up by dest only: a deprecated alias storing under another
  // dest (`--cuda-graph-max-bs`, dest cuda_graph_max_bs_decode) reaches argparse, which takes it.
  assertEquals(
    parse(["--config", "/s/m.yaml"], { "/s/m.yaml": 'cuda-graph-max-bs: "8"\n' }).api_keys,
    [],
  );
  // An argparse abbreviation as the file's key works as it would on the command line.
  assertEquals(parse(["--config", "/s/a.yaml"], { "/s/a.yaml": 'api-k: "k"\n' }).api_keys, ["k"]);
});

Deno.test("refusals: SGLang's own messages, argparse's, and the fake's stricter ones", () => {
  const ok = { "/s/k.yaml": '"api-key": "k"\n' };
  const cases: [string[], Record<string, string | Error>, [string, string], string?][] = [
    // SGLang's ValueErrors (ConfigArgumentMerger).
    [["--config", "/s/k.yaml", "--config", "/s/k.yaml"], ok, [
      "ValueError",
      "Multiple config files specified! Only one allowed.",
    ]],
    [["--config"], ok, ["ValueError", "No config file specified after --config flag!"]],
    [["--config", "/s/k.json"], { "/s/k.json": "{}" }, [
      "ValueError",
      "Config file must be YAML format, got: .json",
    ]],
    [["--config", "/s/noext"], {}, ["ValueError", "Config file must be YAML format, got: "]],
    [["--config", "/s/.yaml"], {}, ["ValueError", "Config file must be YAML format, got: "]],
    [["--config", "/s/gone.yaml"], {}, ["ValueError", "Config file not found: /s/gone.yaml"]],
    [["--config", "/s/l.yaml"], { "/s/l.yaml": "- a\n- b\n" }, [
      "ValueError",
      "Config file must contain a dictionary at root level",
    ]],
    [["--config", "/s/s.yaml"], { "/s/s.yaml": '"just a string"\n' }, [
      "ValueError",
      "Config file must contain a dictionary at root level",
    ]],
    [["--config", "/s/p.yaml"], { "/s/p.yaml": new Deno.errors.PermissionDenied("x") }, [
      "PermissionError",
      "[Errno 13] Permission denied: '/s/p.yaml'",
    ]],
    // The file's keys go to argparse as written: unknown or underscored ones are unrecognized.
    [["--config", "/s/u.yaml"], { "/s/u.yaml": 'bogus: "1"\n' }, [
      "UsageError",
      "unrecognized arguments: --bogus 1",
    ]],
    [["--config", "/s/u.yaml"], { "/s/u.yaml": 'api_key: "k"\n' }, [
      "UsageError",
      "unrecognized arguments: --api_key k",
    ]],
    // A store_true flag with a string is the flag plus a stray argument.
    [["--config", "/s/t.yaml"], { "/s/t.yaml": 'enable-metrics: "yes"\n' }, [
      "UsageError",
      "unrecognized arguments: yes",
    ]],
    [["--config", "/s/i.yaml"], { "/s/i.yaml": 'port: "eighty"\n' }, [
      "UsageError",
      "argument --port: invalid int value: 'eighty'",
    ]],
    // A flag whose action is neither store nor store_true (SGLang main's deprecated ones).
    [["--config", "/s/g.yaml"], { "/s/g.yaml": "disable-cuda-graph: true\n" }, [
      "ValueError",
      "Unsupported config option 'disable_cuda_graph' with action 'DeprecatedStoreTrueAction'",
    ]],
    [
      ["--config", "/s/g.yaml"],
      { "/s/g.yaml": "enable-metrics: true\ndisable_cuda_graph: true\n" },
      [
        "ValueError",
        "Unsupported config option 'disable_cuda_graph' with action 'DeprecatedStoreTrueAction'",
      ],
    ],
    // Before 0.5.3 SGLang has no --config.
    [
      ["--config", "/s/k.yaml"],
      ok,
      ["UsageError", "unrecognized arguments: --config /s/k.yaml"],
      "0.5.2",
    ],
    // The fake's own: spellings SGLang would parse and then ignore, YAML outside llmgw's subset.
    [["--config=/s/k.yaml"], ok, ["FakeConfigFileError", "--config=/s/k.yaml: real SGLang merges"]],
    [["--conf", "/s/k.yaml"], ok, ["FakeConfigFileError", "--conf: real SGLang merges"]],
    ...[
      "api-key: k\n", // plain scalars: YAML would type 123 or 1e5
      "api-key: 'k'\n",
      'api-key: "k" # comment\n',
      'api-key: "a\\nb"\n',
      "nested:\n  a: b\n",
      "yes: true\n",
      "a: [1]\n",
    ].map((text): [string[], Record<string, string>, [string, string]] => [
      ["--config", "/s/x.yaml"],
      { "/s/x.yaml": text },
      ["FakeConfigFileError", "cannot read config file /s/x.yaml line 1: the fake reads only"],
    ]),
    [["--config", "/s/d.yaml"], { "/s/d.yaml": '"api-key": "a"\n"api-key": "b"\n' }, [
      "FakeConfigFileError",
      "cannot read config file /s/d.yaml line 2: api-key is repeated",
    ]],
  ];
  for (const [args, map, [type, message], version] of cases) {
    const [gotType, gotMessage] = refusal(args, map, version);
    assertEquals(gotType, type, `${args.join(" ")} ${JSON.stringify(map)}`);
    assertStringIncludes(gotMessage, message, `${args.join(" ")} ${JSON.stringify(map)}`);
  }
  // No refusal ever shows the file's values (the key).
  assertOk(
    !refusal(["--config", "/s/x.yaml"], { "/s/x.yaml": "api-key: s3cret\n" })[1].includes("s3cret"),
  );
});

Deno.test("a refused config file ends the process as Python does: traceback, ValueError, exit 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_fake_config_" });
  try {
    const port = freePort();
    const missing = `${dir}/none.yaml`;
    await withEngine(sglangArgv(port, ["--config", missing]), {}, port, async (e: Engine) => {
      assertEquals((await e.exit()).code, 1);
      const lines = e.err.trimEnd().split("\n");
      assertEquals(lines.slice(-2), [
        "Traceback (most recent call last):",
        `ValueError: Config file not found: ${missing}`,
      ]);
    });
    // An unknown key is argparse's: exit 2 with its message (the supervisor's "refused its arguments").
    Deno.writeTextFileSync(`${dir}/k.yaml`, '"bogus-flag": "1"\n');
    await withEngine(sglangArgv(port, ["--config", `${dir}/k.yaml`]), {}, port, async (e) => {
      assertEquals((await e.exit()).code, 2);
      assertStringIncludes(
        e.err,
        "launch_server.py: error: unrecognized arguments: --bogus-flag 1",
      );
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
