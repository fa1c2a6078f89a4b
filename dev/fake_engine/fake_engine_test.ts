/**
 * Tests of the fake engine's entry (dev/fake_engine/fake_engine.ts) and its shims in
 * dev/fake_engine/bin, as real processes: a bad command line exits 2 with
 * argparse's message, and the python3 shim runs the fake only for
 * `-m sglang.launch_server`.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../../tests/assert.ts";
import { BIN, sglangArgv, vllmArgv, withEngine } from "../../tests/fake_engine_harness.ts";

Deno.test("an unknown flag or a missing value exits 2 with argparse's message", async () => {
  const cases: [string[], string][] = [
    [vllmArgv(1, ["--bogus"]), "vllm: error: unrecognized arguments: --bogus\n"],
    [
      vllmArgv(1, ["--max-model-len"]),
      "vllm serve: error: argument --max-model-len: expected one argument\n",
    ],
    [
      sglangArgv(1, ["--bogus", "x"]),
      "launch_server.py: error: unrecognized arguments: --bogus x\n",
    ],
    [
      sglangArgv(1, ["--tp-size"]),
      "launch_server.py: error: argument --tp-size/--tensor-parallel-size: expected one argument\n",
    ],
  ];
  for (const [argv, message] of cases) {
    await withEngine(argv, {}, 1, async (e) => {
      assertEquals((await e.exit()).code, 2, argv.join(" "));
      assertOk(e.err.startsWith("usage: "), e.err);
      assertOk(
        e.err.endsWith(message),
        `${JSON.stringify(e.err)} must end with ${JSON.stringify(message)}`,
      );
    });
  }
});

const realPython = (() => {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    try {
      if (dir !== "" && Deno.statSync(`${dir}/python3`).isFile) return true;
    } catch {
      // Not here.
    }
  }
  return false;
})();

Deno.test({
  name: "the python3 shim runs the real python3 for anything but sglang.launch_server",
  ignore: !realPython,
  fn: async () => {
    await withEngine(
      [
        "python3",
        "-c",
        "import os, sys; print('real', sys.version_info[0]); print(os.environ['PATH'])",
      ],
      {},
      1,
      async (e) => {
        assertEquals((await e.exit()).code, 0, e.err);
        assertOk(e.out.startsWith("real 3\n"), e.out);
        assertOk(
          !e.out.split("\n")[1].split(":").includes(BIN),
          "the shim's directory is taken off PATH",
        );
      },
    );
  },
});

Deno.test("the python3 shim never runs itself again when no other python3 is on PATH", async () => {
  await withEngine(
    ["python3", "-c", "print(1)"],
    { PATH: `${BIN}:${BIN}/.:/nonexistent` },
    1,
    async (e) => {
      assertEquals((await e.exit()).code, 127);
      assertStringIncludes(e.err, "python3: not found");
    },
  );
});
