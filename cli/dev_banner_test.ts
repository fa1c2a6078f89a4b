import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { devBanner, type DevBannerFacts, devCliCommand, gatewayAccess } from "./dev_banner.ts";

const FACTS: DevBannerFacts = {
  controlUrl: "https://127.0.0.1:7070",
  gatewayUrl: "https://127.0.0.1:7080",
  dir: "/d",
  envPath: "/d/dev.env",
  caPath: "/d/control/tls/ca.crt",
  nodes: ["h100-a (dgx_h100_idle)"],
  apiKeys: 0,
  tokenKept: false,
  cli: "deno task llmgw",
  hub:
    "http://127.0.0.1:7110 (the fake hub, pid 42: 3 synthetic models; set HF_ENDPOINT to use another)",
};

Deno.test("dev banner: the gateway is open to loopback only while no API key exists", () => {
  assertEquals(gatewayAccess(0), "open to loopback until an API key exists");
  assertEquals(gatewayAccess(1), "needs an API key: 1 exists (llmgw apikeys list)");
  assertEquals(gatewayAccess(3), "needs an API key: 3 exist (llmgw apikeys list)");
  const open = devBanner(FACTS);
  assertStringIncludes(open, "(OpenAI-compatible; open to loopback until an API key exists)");
  assertOk(!open.includes("authorization: Bearer"), open);
  const keyed = devBanner({ ...FACTS, apiKeys: 2 });
  assertOk(!keyed.includes("open to loopback"), keyed);
  // The curl example then carries a key.
  assertStringIncludes(keyed, `-H "authorization: Bearer $YOUR_API_KEY"`);
});

Deno.test("dev banner: names the hub models come from", () => {
  assertStringIncludes(
    devBanner(FACTS),
    "  hub            http://127.0.0.1:7110 (the fake hub, pid 42: 3 synthetic models;",
  );
});

Deno.test("dev banner: says whether the admin token was kept, and how to run the CLI here", () => {
  assertStringIncludes(devBanner(FACTS), "admin token    written to /d/dev.env");
  assertStringIncludes(
    devBanner({ ...FACTS, tokenKept: true, cli: "npx -y deno@2.9.6 task llmgw" }),
    "admin token    kept from this directory's last start, in /d/dev.env",
  );
  assertStringIncludes(
    devBanner({ ...FACTS, cli: "npx -y deno@2.9.6 task llmgw" }),
    "    npx -y deno@2.9.6 task llmgw get replicas\n",
  );
});

Deno.test("devCliCommand: deno task where a deno is on PATH, else (or under npx) npx at the running Deno's version", () => {
  const has = (dirs: string[]) => (f: string) => dirs.some((d) => f === `${d}/deno`);
  const npx = `npx -y deno@${Deno.version.deno} task llmgw`;
  assertEquals(devCliCommand({ PATH: "/usr/bin:/bin" }, has(["/bin"])), "deno task llmgw");
  assertEquals(devCliCommand({ PATH: "/usr/bin:/bin" }, has([])), npx);
  assertEquals(devCliCommand({ PATH: "" }, has([""])), npx);
  // npx puts its cached deno on dev's PATH, not on the operator's shell's.
  assertEquals(
    devCliCommand(
      { PATH: "/root/.npm/_npx/1/node_modules/.bin:/usr/bin", npm_command: "exec" },
      () => true,
    ),
    npx,
  );
});
