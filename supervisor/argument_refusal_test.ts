import { assertEquals } from "../tests/assert.ts";
import { argumentRefusal } from "./argument_refusal.ts";

Deno.test("argumentRefusal: argparse's usage errors with exit status 2, nothing else", () => {
  const usage = "usage: vllm serve [model_tag] [options]";
  const cases: [string, number | null, string[], string | null][] = [
    [
      "unrecognized argument",
      2,
      [usage, "vllm serve: error: unrecognized arguments: --max-model-lenn"],
      "unrecognized arguments: --max-model-lenn",
    ],
    [
      "bad value",
      2,
      [usage, "api_server.py: error: argument --port: invalid int value: 'x'"],
      "argument --port: invalid int value: 'x'",
    ],
    [
      "missing argument",
      2,
      [
        "usage: sglang",
        "launch_server.py: error: the following arguments are required: --model-path",
      ],
      "the following arguments are required: --model-path",
    ],
    ["exit 2 without an argparse line", 2, ["Traceback (most recent call last):", "boom"], null],
    [
      "an argparse-looking line with exit 1",
      1,
      [usage, "x: error: unrecognized arguments: -z"],
      null,
    ],
    ["killed", null, [usage, "x: error: unrecognized arguments: -z"], null],
    ["an indented line is not argparse's", 2, ["  foo: error: bar"], null],
    ["empty log", 2, [], null],
  ];
  for (const [name, code, tail, want] of cases) {
    assertEquals(argumentRefusal(code, tail), want, name);
  }
});
