/**
 * `llmgw dev` shares a model between its hosts (issue #25 item 1: "the whole
 * path (download, verify, share, offline start) runs in dev"): in a fresh
 * dev, h100-a and h100-b both run llama-8b (3 replicas, spread on the two
 * H100 nodes) and start at the same instant; the hub sends that revision
 * once, and h100-b takes every byte of it from h100-a's peer route over
 * the cluster's mTLS. The hub is a fake hub of this test's own, named by
 * `HF_ENDPOINT` (dev then starts none), so its counters can be read; its
 * models are dev's (cli/dev_hub.ts). The dev process is stopped by pid
 * (SIGTERM, then SIGKILL) with every engine it left, even on failure.
 */
import { assertEquals, assertOk } from "./assert.ts";
import { until } from "./until.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { DEV_HUB_MODELS } from "../cli/dev_hub.ts";
import { parseFakeHubArgs } from "../dev/fake_hub/fake_hub_args.ts";
import { startFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { devBases, readDevEnv, spawnDev, stopDev } from "./dev_processes.ts";
import { portsOf } from "./port_plan.ts";

/** This file's ports (tests/port_plan.ts): room for two `llmgw dev` layouts. */
const PORTS = portsOf(import.meta.url);

const LLAMA = "meta-llama/Llama-3.1-8B-Instruct";
const QWEN = "Qwen/Qwen2.5-7B-Instruct";

interface EventSeen {
  kind: string;
  subject: string;
  message: string;
}

Deno.test({
  name: "llmgw dev: one H100 host takes llama-8b from the hub, the other from it (peer, mTLS)",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const specs = parseFakeHubArgs(DEV_HUB_MODELS.flatMap((m) => ["--synthetic", m]), [])
      .synthetic;
    const repos = await Promise.all(specs.map((s) => syntheticModel(s)));
    const bytesOf = (id: string) => {
      const repo = repos.find((r) => r.id === id)!;
      return repo.commits[repo.refs.main].reduce((n, f) => n + f.size, 0);
    };
    const hub = startFakeHub({ repos, hostname: "127.0.0.1", port: 0, cdnPort: 0 });
    const dir = await Deno.makeTempDir({ prefix: "llmgw-dev-peer-" });
    const [base] = devBases(PORTS, 1);
    const dev = spawnDev(base, dir, ["--load-seconds", "1"], { HF_ENDPOINT: hub.endpoint });
    let trust: ReturnType<typeof pinnedFetch> | undefined;
    try {
      const output = () => {
        const o = dev.output();
        return `stdout:\n${o.stdout}\nstderr:\n${o.stderr.slice(-4000)}`;
      };
      const env = await until("dev.env written", () => readDevEnv(dir), {
        timeoutMs: 60_000,
        intervalMs: 200,
        describe: output,
      });
      trust = pinnedFetch(Deno.readTextFileSync(env.ca));
      const events = async (): Promise<EventSeen[]> => {
        const r = await trust!.fetch(`${env.url}/v1/events?limit=1000`, {
          headers: { authorization: `Bearer ${env.token}` },
        });
        return (await r.json() as { events: EventSeen[] }).events;
      };
      // llama-8b's download told done on both H100 hosts, and qwen-7b's on its one host (the
      // hub's counters are read after both).
      let seen: EventSeen[] = [];
      const done = await until(
        "llama-8b downloaded on both H100 hosts, qwen-7b on l40s-a",
        async () => {
          seen = await events();
          const completed = (deployment: string) =>
            seen.filter((e) =>
              e.kind === "download_completed" && e.subject.startsWith(`replica/${deployment}-`)
            );
          const llama = completed("llama-8b");
          const on = (node: string) => llama.some((e) => e.message.includes(` on ${node}:`));
          return on("h100-a") && on("h100-b") && completed("qwen-7b").length > 0 ? llama : null;
        },
        {
          timeoutMs: 60_000,
          intervalMs: 500,
          describe: () =>
            `events:\n${seen.map((e) => `${e.kind} ${e.message}`).join("\n")}\n${output()}`,
        },
      );
      const said = done.map((e) => e.message).join("\n");
      // One H100 host fetched it from the origin (h100-a, unless the plan found h100-b further
      // along); the other took every byte from it, nothing from the hub.
      const from = (node: string) => [
        ...new Set(
          done.filter((e) => e.message.includes(` on ${node}:`))
            .map((e) =>
              / downloaded \((?:\S+ \S+) (from .*)\); the engine starts$/.exec(e.message)?.[1]
            ),
        ),
      ];
      const origin = `from the hub ${hub.endpoint}`;
      const [first, second] = from("h100-a")[0] === origin
        ? ["h100-a", "h100-b"]
        : ["h100-b", "h100-a"];
      assertEquals(from(first), [origin], said);
      assertEquals(from(second), [`from peer ${first}`], said);
      // The hub's own counters: llama-8b once and qwen-7b once (its one host, l40s-a),
      // within 2 % (the revision API and the control plane's facts); never the 405B (it fits
      // nowhere). Twice llama-8b would be 1.5 × this.
      const sent = hub.counters.snapshot();
      const weights = sent.byKind.resolve.bytes + sent.byKind.cdn.bytes;
      const once = bytesOf(LLAMA) + bytesOf(QWEN);
      assertOk(weights >= once, `the hub sent ${weights} bytes of files, under ${once}`);
      assertOk(
        weights <= 1.02 * once,
        `the hub sent ${weights} bytes of files: over 1.02 × ${once} (llama-8b and qwen-7b once)\n${said}`,
      );
      assertEquals(sent.cdnRequestsWithAuthorization, 0);
    } finally {
      trust?.close();
      try {
        await stopDev(dev);
      } finally {
        await hub.stop();
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
    }
  },
});
