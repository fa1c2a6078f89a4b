import { inProcessFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { addCommit } from "../dev/fake_hub/fake_repo.ts";
import { syntheticFiles, syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { expectedHash } from "./file_hash.ts";
import { HubToken } from "./hub_config.ts";
import { HubClient } from "./hub_client.ts";
import {
  HubAnswerError,
  HubAuthError,
  HubEntryNotFoundError,
  HubGatedError,
  HubRepoNotFoundError,
  HubRevisionNotFoundError,
} from "./hub_errors.ts";

const TOKEN = "hf_granted_s3cr3t_0123456789";
const OTHER = "hf_other_s3cr3t_0123456789";

async function fixture() {
  const open = await syntheticModel({ repo: "org/open", shards: 2, weightBytes: 200_000 });
  const v2 = addCommit(
    open,
    await syntheticFiles({ repo: "org/open", shards: 1, weightBytes: 3000, seed: 2 }),
    ["v2"],
  );
  const gated = await syntheticModel({
    repo: "org/gated",
    shards: 1,
    weightBytes: 5000,
    gated: "auto",
    grantedTokens: [TOKEN],
  });
  const hub = inProcessFakeHub({ repos: [open, gated], tokens: [TOKEN, OTHER] });
  const client = (token?: string) =>
    new HubClient({
      config: {
        endpoint: hub.endpoint,
        token: token === undefined ? undefined : new HubToken(token),
      },
      fetch: hub.fetch,
      userAgent: "llmgw-test",
    });
  return { hub, open, v2, client };
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

Deno.test("a revision resolves to its commit and every file with size and hashes", async () => {
  const { open, v2, client } = await fixture();
  const snapshot = await client().resolveRevision("org/open", "main");
  assertEquals(snapshot.repo, "org/open");
  assertEquals(snapshot.commit, open.refs.main);
  const listed = open.commits[open.refs.main].map(({ path, size, blobId, sha256 }) =>
    sha256 === undefined ? { path, size, blobId } : { path, size, blobId, sha256 }
  );
  assertEquals(snapshot.files, listed);
  assertEquals((await client().resolveRevision("org/open", "v2")).commit, v2);
  assertEquals((await client().resolveRevision("org/open", v2)).commit, v2);
});

Deno.test("byte ranges come from resolve, LFS files through the CDN, and hash to what the listing says", async () => {
  const { hub, client } = await fixture();
  const c = client(TOKEN);
  const snapshot = await c.resolveRevision("org/open");
  const source = c.byteSource();
  assertEquals([source.kind, source.name], ["hub", hub.endpoint]);
  const signal = new AbortController().signal;
  for (const file of snapshot.files) {
    // In three ranges, as the cache reads a file in parallel.
    const cuts = [0, Math.floor(file.size / 3), Math.floor((2 * file.size) / 3), file.size];
    const { hash, want } = expectedHash(file);
    for (let i = 0; i < 3; i++) {
      const bytes = await readAll(
        await source.read("org/open", snapshot.commit, file, cuts[i], cuts[i + 1], signal),
      );
      assertEquals(bytes.byteLength, cuts[i + 1] - cuts[i], `${file.path} range ${i}`);
      hash.update(bytes);
    }
    assertEquals(hash.hex(), want, file.path);
  }
  const counts = hub.counters.snapshot();
  assertOk(counts.byKind.cdn.requests >= 6, "LFS shards were read from the CDN");
  assertEquals(counts.cdnRequestsWithAuthorization, 0);
  assertEquals(Object.keys(counts.byCaller), ["llmgw-test"]);
});

Deno.test("HEAD on resolve gives the commit, the content's ETag and size, and where the bytes are", async () => {
  const { hub, open, client } = await fixture();
  const files = open.commits[open.refs.main];
  const shard = files.find((f) => f.sha256 !== undefined)!;
  const lfs = await client().fileMetadata("org/open", "main", shard.path);
  assertEquals([lfs.commit, lfs.etag, lfs.size], [open.refs.main, shard.sha256, shard.size]);
  assertEquals(new URL(lfs.location).origin, hub.cdnOrigin);
  const config = files.find((f) => f.path === "config.json")!;
  const small = await client().fileMetadata("org/open", "main", "config.json");
  assertEquals([small.etag, small.size], [config.blobId, config.size]);
  assertEquals(small.location, `${hub.endpoint}/org/open/resolve/main/config.json`);
});

Deno.test("the hub's refusals become errors that say what to do", async () => {
  const { hub, open, client } = await fixture();
  const at = hub.endpoint;
  await assertRejects(
    () => client().resolveRevision("org/open", "v9"),
    HubRevisionNotFoundError,
    `model org/open revision v9 not found on ${at}`,
  );
  await assertRejects(
    () => client().resolveRevision("org/none"),
    HubRepoNotFoundError,
    `model org/none not found on ${at}`,
  );
  await assertRejects(
    () => client(OTHER).resolveRevision("org/none"),
    HubRepoNotFoundError,
    `model org/none not found on ${at}`,
  );
  await assertRejects(
    () => client().resolveRevision("org/gated"),
    HubGatedError,
    "model org/gated is gated: set HF_TOKEN to a token that was granted access",
  );
  await assertRejects(
    () => client(OTHER).resolveRevision("org/gated"),
    HubGatedError,
    `HF_TOKEN was not granted access: ask for access at ${at}/org/gated`,
  );
  await assertRejects(
    () => client("hf_nobody_knows_me").resolveRevision("org/open"),
    HubAuthError,
    "refused HF_TOKEN",
  );
  await assertRejects(
    () => client().resolveRevision("not a repo"),
    HubAnswerError,
    "a hub model id is org/name",
  );
  const signal = new AbortController().signal;
  const ghost = { path: "ghost.bin", size: 10, blobId: "0".repeat(40) };
  await assertRejects(
    () => client().byteSource().read("org/open", open.refs.main, ghost, 0, 10, signal),
    HubEntryNotFoundError,
    `file ghost.bin of model org/open revision ${open.refs.main} not found on ${at}`,
  );
  await assertRejects(
    () => client().byteSource().read("org/open", open.refs.main, ghost, 5, 11, signal),
    RangeError,
    "the file has 10 bytes",
  );
  // A gated repo's files with a granted token: the token reached the hub (and only the hub).
  const gated = await client(TOKEN).resolveRevision("org/gated");
  const shard = gated.files.find((f) => f.sha256 !== undefined)!;
  assertEquals(
    (await readAll(
      await client(TOKEN).byteSource().read("org/gated", gated.commit, shard, 0, 16, signal),
    )).byteLength,
    16,
  );
  assertEquals(hub.counters.snapshot().cdnRequestsWithAuthorization, 0);
});

Deno.test("a renamed repo's redirect on the hub's own origin is followed, with the token; one elsewhere is not", async () => {
  const { hub, open } = await fixture();
  const seen: [string, boolean][] = [];
  const renaming: typeof fetch = (input, init) => {
    const request = new Request(input, init);
    seen.push([request.url, request.headers.has("Authorization")]);
    const url = new URL(request.url);
    if (url.pathname.startsWith("/api/models/old/name/")) {
      return Promise.resolve(
        new Response(null, {
          status: 307,
          headers: { Location: url.pathname.replace("/old/name/", "/org/open/") + url.search },
        }),
      );
    }
    if (url.pathname.startsWith("/api/models/away/name/")) {
      return Promise.resolve(
        new Response(null, { status: 302, headers: { Location: "http://elsewhere.test/x" } }),
      );
    }
    return hub.fetch(request);
  };
  const c = new HubClient({
    config: { endpoint: hub.endpoint, token: new HubToken(TOKEN) },
    fetch: renaming,
  });
  assertEquals((await c.resolveRevision("old/name")).commit, open.refs.main);
  assertEquals(seen.map(([, auth]) => auth), [true, true]);
  await assertRejects(() => c.resolveRevision("away/name"), HubAnswerError, "answered 302");
  assertEquals(seen.length, 3);
});
