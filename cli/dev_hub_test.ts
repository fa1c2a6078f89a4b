import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../tests/assert.ts";
import { isRunning } from "../supervisor/proc.ts";
import { DevHubError, startDevHub } from "./dev_hub.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** An environment of `vars` only. */
function envOf(vars: Record<string, string>): (name: string) => string | undefined {
  return (name) => vars[name];
}

Deno.test("dev hub: with HF_ENDPOINT set, the operator's hub and token pass through and nothing starts", async () => {
  const hub = await startDevHub(
    envOf({ HF_ENDPOINT: "https://mirror.example", HF_TOKEN: "hf_x" }),
    { host: "127.0.0.1", port: 1, cdnPort: 2, root: "/nonexistent" },
  );
  assertEquals([hub.endpoint, hub.token, hub.pid], ["https://mirror.example", "hf_x", null]);
  assertEquals(hub.env("HF_ENDPOINT"), "https://mirror.example");
  assertEquals(hub.describe, "https://mirror.example (HF_ENDPOINT), with HF_TOKEN");
  assertOk(!hub.describe.includes("hf_x"));
  await hub.stop();
});

Deno.test("dev hub: without HF_ENDPOINT the fake hub starts as a child, answers, and is gone after stop", async () => {
  const hub = await startDevHub(envOf({}), { host: "127.0.0.1", port: 0, cdnPort: 0, root: ROOT });
  try {
    assertOk(hub.pid !== null && isRunning(hub.pid), "no fake hub process");
    assertEquals(hub.env("HF_ENDPOINT"), hub.endpoint);
    assertStringIncludes(hub.describe, `(the fake hub, pid ${hub.pid}: 3 synthetic models;`);
    const r = await fetch(`${hub.endpoint}/api/models/Qwen/Qwen2.5-7B-Instruct/revision/main`);
    assertEquals(r.status, 200);
    assertOk(/^[0-9a-f]{40}$/.test((await r.json()).sha));
  } finally {
    await hub.stop();
  }
  assertOk(!isRunning(hub.pid!), "the fake hub outlived stop()");
});

Deno.test("dev hub: a fake hub that cannot listen is a DevHubError with its own words", async () => {
  const taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = (taken.addr as Deno.NetAddr).port;
    const e = await assertRejects(
      () => startDevHub(envOf({}), { host: "127.0.0.1", port, cdnPort: 0, root: ROOT }),
      DevHubError,
      "the fake hub did not start:",
    );
    assertStringIncludes(e.message, "AddrInUse");
    assertOk(!e.message.includes("\x1b[") && !/\n\s+at /.test(e.message), e.message);
  } finally {
    taken.close();
  }
});
