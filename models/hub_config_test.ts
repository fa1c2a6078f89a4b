import { assertEquals, assertOk, assertRejects, assertThrows } from "../tests/assert.ts";
import {
  cleanToken,
  hubConfig,
  HubConfigError,
  HubToken,
  parseEndpoint,
  readTokenFile,
} from "./hub_config.ts";

const env = (vars: Record<string, string>) => (name: string) => vars[name];

Deno.test("the endpoint and token come from HF_ENDPOINT and HF_TOKEN, as the hub's client reads them", async () => {
  assertEquals((await hubConfig({ env: env({}) })).endpoint, "https://huggingface.co");
  const config = await hubConfig({
    env: env({ HF_ENDPOINT: "http://127.0.0.1:8123/", HF_TOKEN: " hf_abc\n" }),
  });
  assertEquals(config.endpoint, "http://127.0.0.1:8123");
  assertEquals(config.token?.authorization(), "Bearer hf_abc");
  const older = await hubConfig({ env: env({ HUGGING_FACE_HUB_TOKEN: "hf_old" }) });
  assertEquals(older.token?.authorization(), "Bearer hf_old");
  assertEquals((await hubConfig({ env: env({ HF_TOKEN: "  \n" }) })).token, undefined);
  assertEquals(parseEndpoint("https://mirror.example/hf/"), "https://mirror.example/hf");
});

Deno.test("a bad HF_ENDPOINT is refused, naming the variable", () => {
  assertThrows(() => parseEndpoint("huggingface.co"), HubConfigError, "Cannot use HF_ENDPOINT");
  assertThrows(() => parseEndpoint("ftp://x"), HubConfigError, "ftp: is not http: or https:");
  assertThrows(
    () => parseEndpoint("https://user:pw@x"),
    HubConfigError,
    "put no credentials in the URL",
  );
  assertThrows(() => parseEndpoint("https://x/?a=1"), HubConfigError, "no query or fragment");
});

Deno.test("a token file must be 0600 or stricter, and not empty", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/token`;
    await Deno.writeTextFile(path, "hf_from_file\n", { mode: 0o600 });
    await Deno.chmod(path, 0o600);
    assertEquals((await readTokenFile(path)).authorization(), "Bearer hf_from_file");
    await Deno.chmod(path, 0o400);
    assertEquals((await readTokenFile(path)).authorization(), "Bearer hf_from_file");
    await Deno.chmod(path, 0o644);
    await assertRejects(
      () => readTokenFile(path),
      HubConfigError,
      `Cannot use token file ${path}: its mode is 0644; it must be 0600 or stricter`,
    );
    await Deno.chmod(path, 0o640);
    await assertRejects(() => readTokenFile(path), HubConfigError, "its mode is 0640");
    await assertRejects(
      () => readTokenFile(`${dir}/none`),
      HubConfigError,
      `Cannot use token file ${dir}/none: no such file`,
    );
    await Deno.writeTextFile(`${dir}/empty`, "\n", { mode: 0o600 });
    await Deno.chmod(`${dir}/empty`, 0o600);
    await assertRejects(() => readTokenFile(`${dir}/empty`), HubConfigError, "it is empty");
    // The file named in llmgw's configuration wins over HF_TOKEN; HF_TOKEN over HF_TOKEN_PATH.
    await Deno.chmod(path, 0o600);
    const named = await hubConfig({ env: env({ HF_TOKEN: "hf_env" }), tokenFile: path });
    assertEquals(named.token?.authorization(), "Bearer hf_from_file");
    const both = await hubConfig({ env: env({ HF_TOKEN: "hf_env", HF_TOKEN_PATH: path }) });
    assertEquals(both.token?.authorization(), "Bearer hf_env");
    const viaPath = await hubConfig({ env: env({ HF_TOKEN_PATH: path }) });
    assertEquals(viaPath.token?.authorization(), "Bearer hf_from_file");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a token prints as [redacted] everywhere but its header", () => {
  const token = new HubToken("hf_very_secret");
  for (
    const view of [String(token), `${token}`, JSON.stringify({ token }), Deno.inspect({ token })]
  ) {
    assertOk(!view.includes("hf_very_secret"), view);
  }
  assertOk(token.occursIn("x hf_very_secret y"));
  assertEquals(cleanToken("a\r\nb "), "ab");
});
