/**
 * One host of the peer-transfer benchmark (bench/peer_transfer.sh, numbers in
 * docs/benchmarks.md "Model distribution"), run inside a network namespace:
 *
 * - `pki DIR NAME…`: a cluster CA and a node certificate per name (CN
 *   `node:NAME`, valid for every 10.0.0.0/24 address the script uses);
 * - `serve DIR NAME CACHE FILE`: puts FILE into CACHE as a verified blob of
 *   the benchmark's model and serves it on the peer route over mTLS, port 7443;
 * - `fetch DIR NAME CACHE SNAPSHOT URL[,URL…] [--serve]`: fetches the model
 *   through the agent's own model cache from the peers at URL, in order (16 MiB
 *   chunks, 8 at once, verified), serving what it holds meanwhile with
 *   `--serve` (a link of a chain); prints one JSON line with the seconds and
 *   the CPU seconds (user, system) the fetch took.
 *
 * @module
 */
import { CertificateAuthority } from "../tls/authority.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { serveHttps } from "../tls/https_server.ts";
import { PeerServer } from "../agent/peer_server.ts";
import { CacheLayout } from "../agent/model_cache/cache_layout.ts";
import { rememberVerified } from "../agent/model_cache/cache_inspect.ts";
import { denoCacheFs } from "../agent/model_cache/cache_fs.ts";
import { ModelCache } from "../agent/model_cache/model_cache.ts";
import { WrittenChunks } from "../agent/model_cache/written_chunks.ts";
import { PeerByteSource } from "../models/peer_byte_source.ts";
import type { RepoSnapshot } from "../models/repo_snapshot.ts";
import { cpuSince, cpuTime } from "./proc_cpu.ts";

const DAY = 86_400_000;
/** The peer route's port (bench/peer_cpu.ts picks a free one on a shared host). */
const PORT = Number(Deno.env.get("PEER_PORT") ?? "7443");

async function pki(dir: string, names: string[]) {
  const now = Date.now();
  const { ca } = await CertificateAuthority.create({ now, lifetimeMs: DAY });
  await Deno.writeTextFile(`${dir}/ca.crt`, ca.certPem);
  // The script's addresses, and any a caller names (a test lab's own subnet).
  const extra = (Deno.env.get("PKI_IPS") ?? "").split(",").filter((ip) => ip !== "");
  const ips = [...Array.from({ length: 20 }, (_, i) => `10.0.0.${i + 1}`), ...extra];
  for (const name of names) {
    const pair = await ca.issueWithKey({
      commonName: `node:${name}`,
      ipAddresses: ["127.0.0.1", ...ips],
      use: "server+client",
      now,
      lifetimeMs: DAY,
    });
    await Deno.writeTextFile(`${dir}/${name}.crt`, pair.cert);
    await Deno.writeTextFile(`${dir}/${name}.key`, pair.key);
  }
}

async function pair(dir: string, name: string) {
  return {
    ca: await Deno.readTextFile(`${dir}/ca.crt`),
    cert: await Deno.readTextFile(`${dir}/${name}.crt`),
    key: await Deno.readTextFile(`${dir}/${name}.key`),
  };
}

async function servePeer(dir: string, name: string, cache: string, written?: WrittenChunks) {
  const { ca, cert, key } = await pair(dir, name);
  const peer = new PeerServer({ layout: new CacheLayout(cache), maxUploads: 8, written });
  return await serveHttps(
    { hostname: "0.0.0.0", port: PORT, cert, key, ca },
    (req, info) => peer.handle(req, info),
  );
}

const [mode, dir, name, ...rest] = Deno.args;
if (mode === "pki") {
  await pki(dir, [name, ...rest]);
} else if (mode === "serve") {
  const [cache, file] = rest;
  const snapshot: RepoSnapshot = JSON.parse(await Deno.readTextFile(`${dir}/snapshot.json`));
  const layout = new CacheLayout(cache);
  const repoFile = snapshot.files[0];
  await Deno.mkdir(`${layout.repoDir(snapshot.repo)}/blobs`, { recursive: true });
  await Deno.rename(file, layout.blobPath(snapshot.repo, repoFile));
  await rememberVerified(denoCacheFs, layout, snapshot.repo, repoFile);
  await servePeer(dir, name, cache);
  console.log(JSON.stringify({ serving: name }));
} else if (mode === "fetch") {
  const [cache, snapshotPath, url, flag] = rest;
  const snapshot: RepoSnapshot = JSON.parse(await Deno.readTextFile(snapshotPath));
  // Shared, as in the agent: the chunks being written are streamed as they land.
  const written = new WrittenChunks();
  const server = flag === "--serve" ? await servePeer(dir, name, cache, written) : null;
  const { ca, cert, key } = await pair(dir, name);
  const http = pinnedFetch(ca, { cert, key });
  // The agent's defaults (16 MiB chunks, 8 at once) unless CHUNK_MIB / CHUNKS_AT_ONCE say otherwise.
  const chunkMib = Number(Deno.env.get("CHUNK_MIB") ?? "16");
  const model = new ModelCache({
    root: cache,
    chunkBytes: chunkMib * 2 ** 20,
    concurrency: Number(Deno.env.get("CHUNKS_AT_ONCE") ?? "8"),
    written,
    // Where each range came from when a source failed: the log says it.
    onEvent: (e) => {
      if (e.kind === "source_changed" || e.kind === "chunk_failed") {
        console.error(JSON.stringify(e));
      }
    },
  });
  // URL may list several peers, comma-separated: the sources in order (a plan's ancestors).
  const sources = url.split(",").map((u) =>
    new PeerByteSource({ nodeId: u, url: u, fetch: http.fetch, maxWaitMs: 60_000 })
  );
  const began = performance.now();
  const cpuBefore = cpuTime();
  await model.ensureSnapshot(snapshot, sources);
  const cpu = cpuSince(cpuBefore, cpuTime());
  const seconds = (performance.now() - began) / 1000;
  const line = JSON.stringify({ host: name, seconds: Number(seconds.toFixed(2)), cpu });
  await Deno.writeTextFile(`${dir}/done_${name}`, line + "\n");
  // A link of a chain serves on until the script says every host is done.
  for (let i = 0; server !== null && i < 36_000; i++) {
    if (await Deno.stat(`${dir}/stop`).then(() => true, () => false)) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await server?.shutdown(0);
  http.close();
} else {
  console.error("usage: peer_transfer.ts pki|serve|fetch DIR NAME …");
  Deno.exit(2);
}
