/**
 * The fake Hugging Face Hub as a program, for `llmgw dev` and by hand:
 *
 * ```sh
 * FAKE_HUB_TOKENS=hf_dev deno run -A --no-config dev/fake_hub/fake_hub.ts --port 8123 \
 *   --synthetic meta-llama/Llama-3.1-8B-Instruct,shards=4,bytes=64MiB,gated
 * ```
 *
 * It prints one JSON line when listening (`{"fake_hub":"listening","endpoint":…}`)
 * and stops on SIGINT or SIGTERM. Flags: `fake_hub_args.ts`. It imports only
 * its siblings and the `models/` files that have no npm imports, so it runs
 * from any directory without a deno.json (`--no-config`).
 *
 * @module
 */
import { parseFakeHubArgs, UsageError } from "./fake_hub_args.ts";
import { reposFromDir } from "./fake_hub_dir.ts";
import { startFakeHub } from "./fake_hub_server.ts";
import { syntheticModel } from "./synthetic_model.ts";
import type { FakeRepo } from "./fake_repo.ts";

async function main(): Promise<number> {
  const tokens = (Deno.env.get("FAKE_HUB_TOKENS") ?? "").split(",").map((t) => t.trim()).filter((
    t,
  ) => t !== "");
  let args;
  try {
    args = parseFakeHubArgs(Deno.args, tokens);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    console.error(`fake_hub: ${e.message}`);
    return 2;
  }
  const repos: FakeRepo[] = [];
  try {
    if (args.models !== undefined) repos.push(...await reposFromDir(args.models));
    for (const spec of args.synthetic) repos.push(await syntheticModel(spec));
  } catch (e) {
    console.error(`fake_hub: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
  const hub = startFakeHub({
    repos,
    tokens,
    hostname: args.host,
    port: args.port,
    cdnPort: args.cdnPort,
    bytesPerSecond: args.rate,
    signedUrlTtlSeconds: args.ttl,
  });
  const stopped = new Promise<void>((resolve) => {
    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      Deno.addSignalListener(signal, () => resolve());
    }
    if (args.stopOnStdinClose) {
      // The parent's end of the pipe closes when it exits, however it exits.
      (async () => {
        for await (const _ of Deno.stdin.readable) {
          // Nothing is read from it: only its end matters.
        }
        resolve();
      })().catch(() => resolve());
    }
  });
  console.log(JSON.stringify({
    fake_hub: "listening",
    endpoint: hub.endpoint,
    cdn: hub.cdnOrigin,
    repos: repos.map((r) => {
      const files = r.commits[r.refs.main];
      return {
        id: r.id,
        commit: r.refs.main,
        files: files.length,
        bytes: files.reduce((n, f) => n + f.size, 0),
        gated: r.gated,
      };
    }),
  }));
  await stopped;
  await hub.stop();
  return 0;
}

if (import.meta.main) Deno.exit(await main());
