import { startFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { assertEquals, assertOk, assertRejects } from "../tests/assert.ts";
import { HubToken } from "./hub_config.ts";
import { HubClient } from "./hub_client.ts";
import { HubAnswerError, HubUnreachableError } from "./hub_errors.ts";
import type { RepoFile } from "./repo_snapshot.ts";

const COMMIT = "a".repeat(40);
const FILE: RepoFile = {
  path: "model.safetensors",
  size: 100,
  blobId: "b".repeat(40),
  sha256: "c".repeat(64),
};
const CONTENT = new Uint8Array(100).map((_, i) => i);
const signal = new AbortController().signal;

/** A mirror that answers every request with `answer` (a misbehaving server, in-process). */
function mirror(answer: (request: Request) => Response) {
  const seen: Request[] = [];
  const fetcher: typeof fetch = (input, init) => {
    const request = new Request(input, init);
    seen.push(request);
    return Promise.resolve(answer(request));
  };
  const client = new HubClient({
    config: { endpoint: "http://mirror.test", token: new HubToken("hf_tok_123456") },
    fetch: fetcher,
  });
  return { source: client.byteSource(), seen };
}

const read = (source: ReturnType<typeof mirror>["source"], start: number, end: number) =>
  source.read("org/m", COMMIT, FILE, start, end, signal);

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

Deno.test("a 206 whose Content-Range is not the range asked for is refused", async () => {
  for (const range of ["bytes 0-9/100", "bytes 10-20/100", "bytes 10-19/99", "bytes */100", null]) {
    const { source } = mirror(() =>
      new Response(CONTENT.slice(10, 20), {
        status: 206,
        headers: range === null ? {} : { "Content-Range": range },
      })
    );
    await assertRejects(
      () => read(source, 10, 20),
      HubAnswerError,
      `answered bytes 10-19 of file model.safetensors`,
    );
  }
});

Deno.test("a server that ignores Range and sends the whole file yields exactly the range", async () => {
  const { source, seen } = mirror(() => new Response(CONTENT, { status: 200 }));
  assertEquals(await readAll(await read(source, 10, 20)), CONTENT.slice(10, 20));
  assertEquals(seen[0].headers.get("Range"), "bytes=10-19");
});

Deno.test("a 206 with more bytes than its Content-Range never yields more than asked", async () => {
  const { source } = mirror(() =>
    new Response(CONTENT.slice(10, 60), {
      status: 206,
      headers: { "Content-Range": "bytes 10-19/100" },
    })
  );
  assertEquals(await readAll(await read(source, 10, 20)), CONTENT.slice(10, 20));
});

Deno.test("a transfer cut short errors instead of ending quietly", async () => {
  const { source } = mirror(() =>
    new Response(CONTENT.slice(10, 15), {
      status: 206,
      headers: { "Content-Range": "bytes 10-19/100" },
    })
  );
  await assertRejects(
    async () => readAll(await read(source, 10, 20)),
    HubUnreachableError,
    "ended after 5 of 10 bytes",
  );
});

Deno.test("a redirect to another host carries no token; one on the endpoint's own origin does", async () => {
  const { source, seen } = mirror((request) => {
    const url = new URL(request.url);
    if (url.pathname.startsWith("/org/m/resolve/")) {
      return Response.redirect("http://mirror.test/renamed/m/file", 307);
    }
    if (url.pathname === "/renamed/m/file") {
      return Response.redirect("http://cdn.other.test/blob?sig=1", 302);
    }
    return new Response(CONTENT.slice(0, 4), {
      status: 206,
      headers: { "Content-Range": "bytes 0-3/100" },
    });
  });
  assertEquals(await readAll(await read(source, 0, 4)), CONTENT.slice(0, 4));
  assertEquals(seen.map((r) => [new URL(r.url).host, r.headers.get("Authorization") !== null]), [
    ["mirror.test", true],
    ["mirror.test", true],
    ["cdn.other.test", false],
  ]);
});

Deno.test("an answer for another commit than asked is refused", async () => {
  const { source } = mirror(() =>
    new Response(CONTENT, { status: 200, headers: { "X-Repo-Commit": "d".repeat(40) } })
  );
  await assertRejects(() => read(source, 0, 4), HubAnswerError, `from commit ${"d".repeat(40)}`);
});

Deno.test("over real sockets: LFS bytes come from the CDN listener, without the token", async () => {
  const token = "hf_real_socket_token_42";
  const hub = startFakeHub({
    repos: [
      await syntheticModel({
        repo: "org/gated",
        shards: 2,
        weightBytes: 300_000,
        gated: "auto",
        grantedTokens: [token],
      }),
    ],
    tokens: [token],
  });
  try {
    const client = new HubClient({
      config: { endpoint: hub.endpoint, token: new HubToken(token) },
    });
    const snapshot = await client.resolveRevision("org/gated");
    const shard = snapshot.files.find((f) => f.sha256 !== undefined)!;
    const bytes = await readAll(
      await client.byteSource().read("org/gated", snapshot.commit, shard, 100, 150_000, signal),
    );
    assertEquals(bytes.byteLength, 149_900);
    const counts = hub.counters.snapshot();
    assertEquals(counts.byKind.cdn, { requests: 1, bytes: 149_900 });
    assertEquals(counts.cdnRequestsWithAuthorization, 0);
    assertOk(hub.cdnOrigin !== hub.endpoint);
  } finally {
    await hub.stop();
  }
});

Deno.test("a hub switched off is unreachable: connection refused", async () => {
  const hub = startFakeHub({
    repos: [await syntheticModel({ repo: "org/open", shards: 1, weightBytes: 1000 })],
  });
  try {
    const client = new HubClient({ config: { endpoint: hub.endpoint } });
    const snapshot = await client.resolveRevision("org/open");
    await hub.offline();
    const e = await assertRejects(
      () => client.resolveRevision("org/open"),
      HubUnreachableError,
      `hub ${hub.endpoint} unreachable: connection refused`,
    );
    assertOk((e as HubUnreachableError).retryable);
    await assertRejects(
      () => client.byteSource().read("org/open", snapshot.commit, snapshot.files[0], 0, 1, signal),
      HubUnreachableError,
      "connection refused",
    );
    hub.online();
    assertEquals((await client.resolveRevision("org/open")).commit, snapshot.commit);
  } finally {
    await hub.stop();
  }
});
