/** `llmgw control serve` flag checks (design §11): every mistake is found before anything starts. */
import { join } from "node:path";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { controlServeCommand } from "./control_serve.ts";
import { UsageError } from "./usage_error.ts";

Deno.test("control serve refuses a bad flag before it opens, prints or listens on anything", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_control_serve_test_" });
  try {
    const store = join(dir, "store");
    const cases: [string[], string][] = [
      [["--listen", "7070"], '--listen "7070": expected HOST:PORT'],
      [["--heartbeat-interval", "0"], "--heartbeat-interval must be a positive number of seconds"],
      [
        ["--unreachable-after", "soon"],
        '--unreachable-after must be a positive number of seconds, got "soon"',
      ],
      [["--lost-after=-1"], "--lost-after must be a positive number of seconds"],
      [["--gateway-listen", "8080"], '--gateway-listen "8080": expected HOST:PORT'],
      [["extra"], 'control serve: unexpected argument "extra"'],
      [["--bogus"], "control serve:"],
    ];
    for (const [flags, message] of cases) {
      let out = "";
      let err = "";
      await assertRejects(
        () =>
          controlServeCommand(
            ["--listen", "127.0.0.1:0", "--store", store, ...flags],
            (t) => out += t,
            (t) => err += t,
          ),
        UsageError,
        message,
      );
      assertEquals([out, err], ["", ""], `${flags.join(" ")}: nothing printed`);
      assertOk(!(await exists(store)), `${flags.join(" ")}: no store created`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("control serve --help prints the usage and starts nothing", async () => {
  let out = "";
  assertEquals(await controlServeCommand(["--help"], (t) => out += t, () => {}), 0);
  assertOk(out.startsWith("Usage: llmgw control serve"));
  assertOk(out.includes("--gateway-listen"));
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

Deno.test("control serve --hub-token-file readable by others is refused, naming the file, never the token", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_control_serve_hub_" });
  try {
    const tokenFile = join(dir, "hub.token");
    await Deno.writeTextFile(tokenFile, "hf_secret_for_the_test\n", { mode: 0o644 });
    await Deno.chmod(tokenFile, 0o644);
    let out = "";
    let err = "";
    const code = await controlServeCommand(
      [
        "--listen",
        "127.0.0.1:0",
        "--gateway-listen",
        "off",
        "--insecure-http",
        "--store",
        join(dir, "store"),
        "--hub-token-file",
        tokenFile,
      ],
      (t) => out += t,
      (t) => err += t,
    );
    assertEquals(code, 1, err);
    assertOk(err.includes(`Cannot use token file ${tokenFile}`), err);
    assertOk(!`${out}${err}`.includes("hf_secret_for_the_test"), "the token was printed");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
