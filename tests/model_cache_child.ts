/**
 * A process that fetches one model revision into a model cache from a hub
 * and is killed midway by a test (agent/model_cache/crash_resume_test.ts):
 * the crash the cache must resume from is a real SIGKILL, with no `finally`
 * run and no handle closed.
 *
 * Usage: `deno run -A tests/model_cache_child.ts ROOT ENDPOINT REPO CHUNK_BYTES`
 *
 * @module
 */
import { ModelCache } from "../agent/model_cache/model_cache.ts";
import { HubClient } from "../models/hub_client.ts";

const [root, endpoint, repo, chunk] = Deno.args;
const client = new HubClient({ config: { endpoint }, userAgent: "llmgw-test-child" });
const snapshot = await client.resolveRevision(repo, "main");
const cache = new ModelCache({ root, chunkBytes: Number(chunk), concurrency: 2 });
await cache.ensureSnapshot(snapshot, [client.byteSource()], { revision: "main" });
console.log("done");
