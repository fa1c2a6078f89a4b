import { assertEquals, assertOk } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { inProcessFakeHub } from "./fake_hub_server.ts";
import { addCommit } from "./fake_repo.ts";
import { syntheticFiles, syntheticModel } from "./synthetic_model.ts";

const TOKEN = "hf_granted_0123456789";
const OTHER = "hf_other_0123456789";

async function hubWith() {
  const open = await syntheticModel({ repo: "org/open", shards: 2, weightBytes: 50_000 });
  const gated = await syntheticModel({
    repo: "org/gated",
    shards: 1,
    weightBytes: 1000,
    gated: "manual",
    grantedTokens: [TOKEN],
  });
  const hidden = await syntheticModel({
    repo: "org/private",
    shards: 1,
    weightBytes: 1000,
    private: true,
    grantedTokens: [TOKEN],
  });
  const v2 = addCommit(
    open,
    await syntheticFiles({ repo: "org/open", shards: 1, weightBytes: 2000, seed: 2 }),
    ["v2"],
  );
  return {
    hub: inProcessFakeHub({ repos: [open, gated, hidden], tokens: [TOKEN, OTHER] }),
    open,
    v2,
  };
}

const auth = (token?: string): Record<string, string> =>
  token === undefined ? {} : { Authorization: `Bearer ${token}` };

async function refusal(response: Response) {
  await response.body?.cancel();
  return [
    response.status,
    response.headers.get("X-Error-Code"),
    response.headers.get("X-Error-Message"),
  ];
}

Deno.test("the revision API answers a branch, a tag and a commit, with sizes and hashes only with blobs=true", async () => {
  const { hub, open, v2 } = await hubWith();
  const main =
    await (await hub.fetch(`${hub.endpoint}/api/models/org/open/revision/main?blobs=true`)).json();
  assertEquals(main.sha, open.refs.main);
  assertEquals(main.gated, false);
  const shard = main.siblings.find((s: { rfilename: string }) =>
    s.rfilename.endsWith(".safetensors")
  );
  assertOk(
    shard.size > 0 && /^[0-9a-f]{40}$/.test(shard.blobId) &&
      /^[0-9a-f]{64}$/.test(shard.lfs.sha256),
  );
  assertEquals(shard.lfs.size, shard.size);
  assertEquals(
    (await (await hub.fetch(`${hub.endpoint}/api/models/org/open/revision/v2`)).json()).sha,
    v2,
  );
  assertEquals(
    (await (await hub.fetch(`${hub.endpoint}/api/models/org/open/revision/${v2}`)).json()).sha,
    v2,
  );
  const plain = await (await hub.fetch(`${hub.endpoint}/api/models/org/open`)).json();
  assertEquals(plain.sha, open.refs.main);
  assertEquals(Object.keys(plain.siblings[0]), ["rfilename"]);
});

Deno.test("refusals carry the hub's status and X-Error-Code", async () => {
  const { hub, open } = await hubWith();
  const get = (path: string, token?: string) =>
    hub.fetch(`${hub.endpoint}${path}`, { headers: auth(token) });
  assertEquals(await refusal(await get("/api/models/org/none/revision/main")), [
    401,
    "RepoNotFound",
    "Repository not found",
  ]);
  assertEquals(await refusal(await get("/api/models/org/none/revision/main", OTHER)), [
    404,
    "RepoNotFound",
    "Repository not found",
  ]);
  assertEquals(await refusal(await get("/api/models/org/private/revision/main", OTHER)), [
    404,
    "RepoNotFound",
    "Repository not found",
  ]);
  assertEquals((await get("/api/models/org/private/revision/main", TOKEN)).status, 200);
  const [status, code, message] = await refusal(await get("/org/gated/resolve/main/config.json"));
  assertEquals([status, code], [401, "GatedRepo"]);
  assertOk(String(message).includes("Access to model org/gated is restricted"));
  assertEquals(
    (await refusal(await get("/api/models/org/gated/revision/main", OTHER))).slice(0, 2),
    [403, "GatedRepo"],
  );
  assertEquals((await get("/org/gated/resolve/main/config.json", TOKEN)).status, 200);
  assertEquals(await refusal(await get("/api/models/org/open/revision/v9")), [
    404,
    "RevisionNotFound",
    "Invalid rev id: v9",
  ]);
  assertEquals(await refusal(await get("/org/open/resolve/v9/config.json")), [
    404,
    "RevisionNotFound",
    "Invalid rev id: v9",
  ]);
  const missing = await get("/org/open/resolve/main/nope.bin");
  assertEquals(missing.headers.get("X-Repo-Commit"), open.refs.main);
  assertEquals(await refusal(missing), [404, "EntryNotFound", "Entry not found"]);
  assertEquals(await refusal(await get("/api/models/org/open/revision/main", "hf_unknown")), [
    401,
    null,
    "Invalid credentials in Authorization header",
  ]);
});

Deno.test("resolve serves a small file with Range, HEAD without a body, 416 past the end", async () => {
  const { hub, open } = await hubWith();
  const url = `${hub.endpoint}/org/open/resolve/main/config.json`;
  const whole = new Uint8Array(await (await hub.fetch(url)).arrayBuffer());
  const part = await hub.fetch(url, { headers: { Range: "bytes=2-9" } });
  assertEquals(part.status, 206);
  assertEquals(part.headers.get("Content-Range"), `bytes 2-9/${whole.byteLength}`);
  assertEquals(new Uint8Array(await part.arrayBuffer()), whole.subarray(2, 10));
  const suffix = await hub.fetch(url, { headers: { Range: "bytes=-4" } });
  assertEquals(new Uint8Array(await suffix.arrayBuffer()), whole.subarray(whole.byteLength - 4));
  const past = await hub.fetch(url, { headers: { Range: `bytes=${whole.byteLength}-` } });
  assertEquals([past.status, past.headers.get("Content-Range")], [
    416,
    `bytes */${whole.byteLength}`,
  ]);
  const several = await hub.fetch(url, { headers: { Range: "bytes=0-1,4-5" } });
  assertEquals([several.status, (await several.arrayBuffer()).byteLength], [200, whole.byteLength]);
  const head = await hub.fetch(url, { method: "HEAD" });
  assertEquals(head.status, 200);
  assertEquals(head.body, null);
  assertEquals(head.headers.get("Content-Length"), String(whole.byteLength));
  assertEquals(head.headers.get("X-Repo-Commit"), open.refs.main);
  const file = open.commits[open.refs.main].find((f) => f.path === "config.json")!;
  assertEquals(head.headers.get("ETag"), `"${file.blobId}"`);
  assertEquals(head.headers.get("X-Linked-Etag"), null);
});

Deno.test("resolve redirects an LFS file to a signed CDN URL with X-Linked-Etag and X-Linked-Size", async () => {
  const { hub, open } = await hubWith();
  const shard = open.commits[open.refs.main].find((f) => f.sha256 !== undefined)!;
  const head = await hub.fetch(`${hub.endpoint}/org/open/resolve/main/${shard.path}`, {
    method: "HEAD",
    redirect: "manual",
  });
  assertEquals(head.status, 302);
  assertEquals(head.headers.get("X-Linked-Etag"), `"${shard.sha256}"`);
  assertEquals(head.headers.get("X-Linked-Size"), String(shard.size));
  assertEquals(head.headers.get("X-Repo-Commit"), open.refs.main);
  const location = new URL(head.headers.get("Location")!);
  assertEquals(location.origin, hub.cdnOrigin);
  const part = await hub.fetch(location, { headers: { Range: "bytes=0-7" } });
  assertEquals([part.status, part.headers.get("Content-Range")], [206, `bytes 0-7/${shard.size}`]);
  await part.body?.cancel();
  // The signed URL is the CDN's only credential: a token with it is refused, and counted.
  const withToken = await hub.fetch(location, { headers: auth(TOKEN) });
  assertEquals(withToken.status, 400);
  await withToken.body?.cancel();
  location.searchParams.set("Signature", "0".repeat(64));
  const forged = await hub.fetch(location);
  assertEquals(forged.status, 403);
  await forged.body?.cancel();
  assertEquals(hub.counters.snapshot().cdnRequestsWithAuthorization, 1);
});

Deno.test("a signed CDN URL expires", async () => {
  const clock = new FakeClock();
  const repo = await syntheticModel({ repo: "org/open", shards: 1, weightBytes: 1000 });
  const hub = inProcessFakeHub({ repos: [repo], now: () => clock.now(), signedUrlTtlSeconds: 60 });
  const redirect = await hub.fetch(
    `${hub.endpoint}/org/open/resolve/main/model-00001-of-00001.safetensors`,
    { redirect: "manual" },
  );
  await redirect.body?.cancel();
  clock.advance(59_000);
  const early = await hub.fetch(redirect.headers.get("Location")!);
  assertEquals(early.status, 200);
  await early.body?.cancel();
  clock.advance(2_000);
  const late = await hub.fetch(redirect.headers.get("Location")!);
  assertEquals(late.status, 403);
  assertOk((await late.text()).includes("expired"));
});

Deno.test("the counters count requests and body bytes by kind and by caller", async () => {
  const { hub, open } = await hubWith();
  const shard = open.commits[open.refs.main].find((f) => f.sha256 !== undefined)!;
  const config = open.commits[open.refs.main].find((f) => f.path === "config.json")!;
  const ua = { "User-Agent": "agent-1" };
  const listing =
    await (await hub.fetch(`${hub.endpoint}/api/models/org/open/revision/main?blobs=true`, {
      headers: ua,
    })).arrayBuffer();
  await (await hub.fetch(`${hub.endpoint}/org/open/resolve/main/config.json`, { headers: ua }))
    .arrayBuffer();
  const redirect = await hub.fetch(`${hub.endpoint}/org/open/resolve/main/${shard.path}`, {
    headers: { "User-Agent": "engine" },
    redirect: "manual",
  });
  const redirectBytes = (await redirect.arrayBuffer()).byteLength;
  await (await hub.fetch(redirect.headers.get("Location")!, {
    headers: { ...ua, Range: "bytes=10-109" },
  })).arrayBuffer();
  const counts = hub.counters.snapshot();
  assertEquals(counts.byKind.api, { requests: 1, bytes: listing.byteLength });
  assertEquals(counts.byKind.resolve, { requests: 2, bytes: config.size + redirectBytes });
  assertEquals(counts.byKind.cdn, { requests: 1, bytes: 100 });
  assertEquals(counts.byCaller["agent-1"], {
    requests: 3,
    bytes: listing.byteLength + config.size + 100,
  });
  assertEquals(counts.byCaller["engine"], { requests: 1, bytes: redirectBytes });
  assertEquals(counts.totalBytes, listing.byteLength + config.size + redirectBytes + 100);
  hub.counters.reset();
  assertEquals(hub.counters.snapshot().totalBytes, 0);
});
