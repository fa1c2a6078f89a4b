/**
 * The key file withApiKey writes, read by PyYAML's `safe_load` as SGLang's
 * config merger reads it (engine reference §6.2): every key comes back as
 * the same string. Runs where `python3` with PyYAML is installed, skipped
 * (ignored, and said so) elsewhere.
 */
import fc from "fast-check";
import { assertEquals } from "../tests/assert.ts";
import { withApiKey } from "./api_key.ts";

/** PyYAML's version, or null when python3 or PyYAML is missing. */
function pyyamlVersion(): string | null {
  try {
    const out = new Deno.Command("python3", {
      args: ["-c", "import yaml; print(yaml.__version__)"],
      stdout: "piped",
      stderr: "null",
    }).outputSync();
    return out.success ? new TextDecoder().decode(out.stdout).trim() : null;
  } catch {
    return null;
  }
}

const PYYAML = pyyamlVersion();

/** Reads each file text with PyYAML's safe_load; the value of `api-key` per text (null: not a string). */
async function readBack(texts: string[]): Promise<(string | null)[]> {
  const script = [
    "import sys, json, yaml",
    "for line in sys.stdin:",
    "    v = yaml.safe_load(json.loads(line))",
    "    ok = isinstance(v, dict) and list(v) == ['api-key'] and isinstance(v['api-key'], str)",
    "    print(json.dumps(v['api-key'] if ok else None))",
  ].join("\n");
  const child = new Deno.Command("python3", {
    args: ["-c", script],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(texts.map((t) => JSON.stringify(t)).join("\n")));
  await writer.close();
  const out = await child.output();
  return new TextDecoder().decode(out.stdout).trim().split("\n").map((l) => JSON.parse(l));
}

Deno.test({
  name: `the key file reads back as the key in PyYAML's safe_load (${PYYAML ?? "no PyYAML here"})`,
  ignore: PYYAML === null,
  fn: async () => {
    const key = { config_file: { flag: "--config", field: "api-key" } };
    const keys = [
      "123",
      "1e5",
      "yes",
      "null",
      "~",
      'a"b',
      "a\\b",
      "#x:y",
      "ek-" + "A".repeat(43),
      ...fc.sample(fc.stringMatching(/^[\x21-\x2c\x2e-\x7e][\x21-\x7e]{0,63}$/), 2_000),
    ];
    const texts = keys.map((k) => withApiKey({ argv: [], env: {} }, key, k, "/d").file!.text);
    assertEquals(await readBack(texts), keys);
  },
});
