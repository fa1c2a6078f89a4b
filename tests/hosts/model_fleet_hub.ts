/**
 * The fake hub of tests/hosts/model_fleet_test.ts, run inside a lab host:
 * `model_fleet_hub.ts DIR HOST REPO SHARDS BYTES` serves one synthetic model
 * (dev/fake_hub) on HOST:8000 (its CDN on HOST:8001) and talks to the test
 * through files in DIR, since the test's own namespace cannot reach the lab:
 *
 * - `revision.json`: its own revision API's answer (`?blobs=true`), fetched
 *   once listening, the file list the test checks hashes against;
 * - `counters.json`: the request and byte counters, rewritten (whole, by
 *   rename) every 200 ms and once more after switching off;
 * - `offline` (the test writes it): the hub switches off (connections
 *   refused) and writes `offline.done`.
 *
 * Runs until the lab stops it (SIGTERM's default action: nothing here
 * needs a clean end).
 *
 * @module
 */
import { join } from "node:path";
import { startFakeHub } from "../../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../../dev/fake_hub/synthetic_model.ts";

/** The hub's port; its CDN's is the next one. */
export const HUB_PORT = 8000;

async function writeWhole(path: string, text: string): Promise<void> {
  await Deno.writeTextFile(`${path}.tmp`, text);
  await Deno.rename(`${path}.tmp`, path);
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

if (import.meta.main) {
  const [dir, host, repo, shards, bytes] = Deno.args;
  if (bytes === undefined) {
    console.error("usage: model_fleet_hub.ts DIR HOST REPO SHARDS BYTES");
    Deno.exit(2);
  }
  const model = await syntheticModel({
    repo,
    preset: "llama-3.1-8b-instruct",
    shards: Number(shards),
    weightBytes: Number(bytes),
  });
  const hub = startFakeHub({
    repos: [model],
    hostname: host,
    port: HUB_PORT,
    cdnPort: HUB_PORT + 1,
  });
  const counters = () =>
    writeWhole(join(dir, "counters.json"), JSON.stringify(hub.counters.snapshot()));
  // The revision API as any client reads it; these requests are counted, before the test's baseline.
  const answer = await fetch(`${hub.endpoint}/api/models/${repo}/revision/main?blobs=true`, {
    headers: { "user-agent": "model_fleet_test" },
  });
  await writeWhole(join(dir, "revision.json"), await answer.text());
  let online = true;
  console.log(JSON.stringify({ fake_hub: "listening", endpoint: hub.endpoint }));
  // Bounded by the lab: it SIGTERMs this process at close, SIGKILL after a grace.
  while (true) {
    if (online && await exists(join(dir, "offline"))) {
      await hub.offline();
      online = false;
      await counters();
      await writeWhole(join(dir, "offline.done"), "");
    }
    await counters();
    await new Promise((r) => setTimeout(r, 200));
  }
}
