/**
 * The dashboard in a real headless Chromium (issue #17): starts `llmgw dev`
 * on a temporary directory and its own port range, waits for its samples,
 * then runs dashboard.mjs under Node (playwright-core driving Debian's
 * chromium), which checks the pages, a cordon clicked in the page against
 * `llmgw get nodes`, an engine's log line on the replica page, that no
 * request leaves loopback, and takes a screenshot of each page (into
 * docs/screenshots/ with LLMGW_UPDATE_SCREENSHOTS=1, else a temporary directory).
 *
 * Without Node, Chromium or `npm ci` in tests/browser it is skipped, saying
 * why; with LLMGW_REQUIRE_BROWSER=1 (CI) it fails instead. The dev cluster
 * and the Node process are stopped by pid in a `finally`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { pinnedFetch } from "../../tls/trust.ts";
import { assertEquals, assertOk } from "../assert.ts";
import { devBases, type DevProcess, spawnDev, stopDev } from "../dev_processes.ts";
import { portsOf } from "../port_plan.ts";
import { until } from "../until.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const HERE = join(ROOT, "tests/browser");
/** This file's ports (tests/port_plan.ts): room for its `llmgw dev` cluster. */
const PORTS = portsOf(import.meta.url);
const CHROMIUM = Deno.env.get("LLMGW_CHROMIUM") ?? "/usr/bin/chromium";

function nodeWorks(): boolean {
  try {
    return new Deno.Command("node", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** Why the browser test cannot run here, or null when it can. */
function missing(): string | null {
  if (!nodeWorks()) return "node is not on PATH";
  if (!existsSync(CHROMIUM)) {
    return `no Chromium at ${CHROMIUM} (apt-get install chromium)`;
  }
  if (!existsSync(join(HERE, "node_modules/playwright-core"))) {
    return "playwright-core is not installed (npm ci --prefix tests/browser)";
  }
  return null;
}

const why = missing();
const required = Deno.env.get("LLMGW_REQUIRE_BROWSER") === "1";
if (why !== null && !required) {
  console.log(
    `browser tests skipped: ${why}; LLMGW_REQUIRE_BROWSER=1 makes this a failure`,
  );
}

interface Replica {
  id: string;
  deployment: string;
  state: string;
  shards: { node: string; port: number }[];
}

Deno.test({
  name:
    "dashboard in Chromium: sign-in, fleet, cordon seen by the CLI, live engine log, loopback only",
  ignore: why !== null && !required,
  // dev's engines are stopped by stopDev; Node by its pid below.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    if (why !== null) {
      throw new Error(
        `LLMGW_REQUIRE_BROWSER=1 but the browser test cannot run: ${why}`,
      );
    }
    const dir = await Deno.makeTempDir({ prefix: "llmgw-ui-browser-" });
    // The README's screenshots change only when asked: a test run leaves the tree as it was.
    const shots = Deno.env.get("LLMGW_UPDATE_SCREENSHOTS") === "1"
      ? join(ROOT, "docs/screenshots")
      : join(dir, "screenshots");
    const [base] = devBases(PORTS, 1);
    let dev: DevProcess | null = null;
    let node: Deno.ChildProcess | null = null;
    let trust: ReturnType<typeof pinnedFetch> | null = null;
    try {
      dev = spawnDev(base, dir, ["--load-seconds", "1"]);
      const running = dev;
      const describe = () => JSON.stringify(running.output());
      const env = await until("dev.env", async () => {
        try {
          const text = await Deno.readTextFile(join(dir, "dev.env"));
          const kv = Object.fromEntries(
            text.trim().split("\n").map((l) => l.split("=", 2) as [string, string]),
          );
          return kv.LLMGW_URL && kv.LLMGW_TOKEN && kv.LLMGW_CA ? kv : null;
        } catch {
          return null;
        }
      }, { timeoutMs: 60_000, intervalMs: 200, describe });
      trust = pinnedFetch(Deno.readTextFileSync(env.LLMGW_CA));
      const pinned = trust.fetch;
      // A ready llama-8b replica, for its log; llama-405b stays pending on this cluster.
      const ready = await until("a llama-8b replica ready", async () => {
        const r = await pinned(`${env.LLMGW_URL}/v1/replicas`, {
          headers: { authorization: `Bearer ${env.LLMGW_TOKEN}` },
        });
        const { replicas } = await r.json() as { replicas: Replica[] };
        return replicas.find((x) => x.deployment === "llama-8b" && x.state === "ready");
      }, { timeoutMs: 90_000, intervalMs: 250, describe });
      node = new Deno.Command("node", {
        args: [join(HERE, "dashboard.mjs")],
        cwd: HERE,
        env: {
          ...env,
          UI_CHROMIUM: CHROMIUM,
          UI_DENO: Deno.execPath(),
          UI_ROOT: ROOT,
          UI_CORDON_NODE: "l40s-a",
          UI_REPLICA: ready.id,
          UI_ENGINE_PORT: String(ready.shards[0].port),
          UI_SCREENSHOTS: shots,
        },
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      // A hung browser must not hang the suite: the whole run gets three minutes.
      const child = node;
      const timer = setTimeout(() => child.kill("SIGKILL"), 180_000);
      const out = await child.output().finally(() => clearTimeout(timer));
      node = null;
      const text = new TextDecoder().decode(out.stdout);
      const err = new TextDecoder().decode(out.stderr);
      console.log(text.trim());
      assertEquals(
        out.code,
        0,
        `dashboard.mjs failed:\n${text}\n${err}\ndev: ${describe()}`,
      );
      for (const name of ["sign-in", "fleet", "deployments", "replica"]) {
        assertOk(Deno.statSync(join(shots, `${name}.png`)).size > 10_000, `${name}.png written`);
      }
    } finally {
      if (node !== null) {
        try {
          node.kill("SIGKILL");
          await node.status;
        } catch {
          // Gone.
        }
      }
      trust?.close();
      if (dev !== null) await stopDev(dev);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
