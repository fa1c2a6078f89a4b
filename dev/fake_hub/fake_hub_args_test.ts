import { assertEquals, assertThrows } from "../../tests/assert.ts";
import { parseFakeHubArgs, parseSize, UsageError } from "./fake_hub_args.ts";

Deno.test("the fake hub's flags", () => {
  const args = parseFakeHubArgs(
    [
      "--port",
      "8123",
      "--cdn-port",
      "8124",
      "--synthetic",
      "org/a,preset=qwen2.5-7b-instruct,shards=4,bytes=2GiB,gated",
      "--rate",
      "100MiB",
      "--ttl",
      "30",
    ],
    ["hf_t"],
  );
  assertEquals([args.host, args.port, args.cdnPort, args.rate, args.ttl], [
    "127.0.0.1",
    8123,
    8124,
    100 * 1024 ** 2,
    30,
  ]);
  assertEquals(args.synthetic, [{
    repo: "org/a",
    preset: "qwen2.5-7b-instruct",
    shards: 4,
    weightBytes: 2 * 1024 ** 3,
    gated: "manual",
    grantedTokens: ["hf_t"],
  }]);
  assertEquals(parseFakeHubArgs(["--models", "/m"], []).models, "/m");
  assertEquals(args.stopOnStdinClose, false);
  // The index may claim the real model's size while the files stay small.
  const claimed = parseFakeHubArgs([
    "--synthetic",
    "org/q,claim=real,preset=qwen2.5-7b-instruct,bytes=1MiB",
    "--synthetic",
    "org/r,claim=2GiB",
  ], []).synthetic;
  assertEquals(claimed.map((s) => [s.weightBytes, s.claimedBytes]), [
    [1024 ** 2, 15231233024],
    [undefined, 2 * 1024 ** 3],
  ]);
  assertEquals(
    parseFakeHubArgs(["--models", "/m", "--stop-on-stdin-close"], []).stopOnStdinClose,
    true,
  );
  assertEquals(parseSize("1000", "x"), 1000);
});

Deno.test("bad flags are refused, naming the flag", () => {
  assertThrows(() => parseFakeHubArgs([], []), UsageError, "nothing to serve");
  assertThrows(
    () => parseFakeHubArgs(["--port", "70000", "--models", "d"], []),
    UsageError,
    "--port needs a port",
  );
  assertThrows(() => parseFakeHubArgs(["--port"], []), UsageError, "--port needs a value");
  assertThrows(
    () => parseFakeHubArgs(["--rate", "fast", "--models", "d"], []),
    UsageError,
    '--rate: "fast" is not a size',
  );
  assertThrows(() => parseFakeHubArgs(["--synthetic", "nope"], []), UsageError, "is not org/name");
  assertThrows(
    () => parseFakeHubArgs(["--synthetic", "o/n,color=red"], []),
    UsageError,
    'unknown option "color=red"',
  );
  assertThrows(() => parseFakeHubArgs(["--token", "x"], []), UsageError, 'unknown flag "--token"');
});
