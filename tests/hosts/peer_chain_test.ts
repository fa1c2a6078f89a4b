/**
 * Once per fleet across hosts (issue #25 items 3, 8): an origin and four
 * hosts, each a network namespace whose upload is shaped with `tbf`; the
 * hosts fetch a model through the agent's model cache (bench/peer_transfer.ts)
 * from the sources the control plane's plan gives them (models/peer_plan.ts),
 * over the peer route with node certificates of one CA, each serving what it
 * holds as it arrives. One host is SIGKILLed mid-transfer: its follower goes
 * on from the host before it. Every surviving host ends with the model's
 * bytes (SHA-256 checked here too), and the origin sent about one copy.
 * Every process runs under the lab, which stops it (by pid) at close.
 */
import { createHash } from "node:crypto";
import { assertEquals, assertOk } from "../assert.ts";
import { until } from "../until.ts";
import { Lab, type LabHost, type LabProcess, MGMT, netnsAvailable } from "./lab.ts";
import { planPeerSources } from "../../models/peer_plan.ts";

const netns = await netnsAvailable();
const ignore = !netns.ok;
if (!netns.ok) console.warn(`tests/hosts/peer_chain_test.ts ignored: ${netns.reason}`);

const DENO = Deno.execPath();
const BENCH = new URL("../../bench/peer_transfer.ts", import.meta.url).pathname;
const SIZE = 48 * 2 ** 20;
const COMMIT = "1".padStart(40, "0");

async function txBytes(host: LabHost): Promise<number> {
  const r = await host.run("cat", [`/sys/class/net/${host.ifname[MGMT]}/statistics/tx_bytes`]);
  return Number(r.stdout.trim());
}

async function sha256Of(path: string): Promise<string> {
  const hash = createHash("sha256");
  using file = await Deno.open(path);
  for await (const piece of file.readable) hash.update(piece);
  return hash.digest("hex");
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test({
  name: "four hosts fetch one model along the plan's chain; a host killed mid-way is routed around",
  ignore,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "llmgw_peer_chain_" });
    await using lab = await Lab.create({ name: "peers" });
    try {
      // The model: random bytes, hashed here.
      const model = new Uint8Array(SIZE);
      for (let i = 0; i < SIZE; i += 65_536) crypto.getRandomValues(model.subarray(i, i + 65_536));
      await Deno.writeFile(`${dir}/model.bin`, model);
      const sha = createHash("sha256").update(model).digest("hex");
      const snapshot = {
        repo: "bench/model",
        commit: COMMIT,
        files: [{
          path: "model.safetensors",
          size: SIZE,
          blobId: "2".padStart(40, "0"),
          sha256: sha,
        }],
      };
      await Deno.writeTextFile(`${dir}/snapshot.json`, JSON.stringify(snapshot));

      const names = ["o", "a1", "a2", "a3", "a4"];
      const hosts = new Map<string, LabHost>();
      for (const n of names) hosts.set(n, await lab.host(n));
      for (const h of hosts.values()) {
        const shaped = await h.run("tc", [
          ...["qdisc", "add", "dev", h.ifname[MGMT], "root", "tbf"],
          ...["rate", "100mbit", "burst", "256kb", "latency", "50ms"],
        ]);
        assertOk(shaped.success, shaped.stderr);
      }
      const pki = await new Deno.Command(DENO, {
        args: ["run", "-A", "--quiet", BENCH, "pki", dir, ...names],
        env: { PKI_IPS: [...hosts.values()].map((h) => h.address()).join(",") },
      }).output();
      assertOk(pki.success, new TextDecoder().decode(pki.stderr));
      const url = (n: string) => `https://${hosts.get(n)!.address()}:7443`;
      const cacheOf = (n: string) => `${dir}/cache_${n}`;
      const blobDir = (n: string) => `${cacheOf(n)}/models--bench--model/blobs`;

      const origin = hosts.get("o")!;
      await origin.spawn(DENO, [
        ...["run", "-A", "--quiet", BENCH, "serve", dir, "o", cacheOf("o"), `${dir}/model.bin`],
      ]);
      await until(
        "the origin's peer route listening",
        async () => (await origin.run("ss", ["-ltn"])).stdout.includes(":7443"),
        { timeoutMs: 30_000 },
      );
      const before = await txBytes(origin);

      // The control plane's plan over the four hosts; the origin is every host's last source.
      const plan = planPeerSources(
        ["a1", "a2", "a3", "a4"].map((node) => ({ node, holds: false, canServe: true })),
      );
      assertEquals(plan.get("a3")!.peers, ["a2", "a1"]);
      const procs = new Map<string, LabProcess>();
      for (const [node, sources] of plan) {
        const urls = [...sources.peers.map(url), ...(sources.origin ? [url("o")] : [])];
        procs.set(
          node,
          await hosts.get(node)!.spawn(DENO, [
            ...["run", "-A", "--quiet", BENCH, "fetch", dir, node, cacheOf(node)],
            ...[`${dir}/snapshot.json`, urls.join(","), "--serve"],
          ], { env: { CHUNK_MIB: "2", CHUNKS_AT_ONCE: "4" } }),
        );
      }
      // a2 dies once a3 has taken part of the file from it.
      const record = `${blobDir("a3")}/${sha}.llmgw.chunks`;
      await until(
        "a3 holding its first chunks",
        async () => ((await Deno.readTextFile(record).catch(() => "")).split("\n").length) > 4,
        { timeoutMs: 60_000 },
      );
      procs.get("a2")!.kill("SIGKILL");
      const survivors = ["a1", "a3", "a4"];
      await until(
        "every surviving host done",
        async () =>
          (await Promise.all(survivors.map((n) => exists(`${dir}/done_${n}`)))).every(Boolean),
        { timeoutMs: 120_000 },
      );
      for (const n of survivors) {
        const path = `${cacheOf(n)}/models--bench--model/snapshots/${COMMIT}/model.safetensors`;
        assertEquals(await sha256Of(path), sha, n);
        // Nothing half-written is left beside it.
        assertEquals(await exists(`${blobDir(n)}/${sha}.llmgw.incomplete`), false, n);
      }
      // The origin sent one copy of the model, framing and TLS included; a3 went on from a1.
      const sent = (await txBytes(origin)) - before;
      assertOk(sent < 1.02 * SIZE, `the origin sent ${sent} bytes for a ${SIZE}-byte model`);
      assertOk(sent > SIZE, `the origin sent ${sent} bytes`);
      await Deno.writeTextFile(`${dir}/stop`, "");
    } finally {
      await Deno.writeTextFile(`${dir}/stop`, "").catch(() => {});
      await lab.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
