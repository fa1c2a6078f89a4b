/**
 * The token never appears in an error: every way a hub request can fail is
 * made to fail with a token set, and each error (message, stack, inspection,
 * JSON) is searched for it. So is the client itself and its configuration.
 */
import { FakeClock } from "../tests/fake_clock.ts";
import { inProcessFakeHub, startFakeHub } from "../dev/fake_hub/fake_hub_server.ts";
import { syntheticModel } from "../dev/fake_hub/synthetic_model.ts";
import { assertEquals, assertOk } from "../tests/assert.ts";
import { HubToken } from "./hub_config.ts";
import { HubClient } from "./hub_client.ts";
import { HubError } from "./hub_errors.ts";

const SECRET = "hf_leakcheck_7Qm2ZpX9vB4nL0sT";
const signal = new AbortController().signal;

function assertNoToken(what: string, value: unknown): void {
  const e = value as Error;
  const views = [
    String(e),
    e?.message ?? "",
    e?.stack ?? "",
    Deno.inspect(e, { depth: 10, showHidden: true }),
    JSON.stringify(e, Object.getOwnPropertyNames(e ?? {})),
  ];
  for (const view of views) {
    assertOk(!view.includes(SECRET), `${what}: the token appears in ${JSON.stringify(view)}`);
  }
}

async function failure(what: string, run: () => Promise<unknown>, failures: Map<string, unknown>) {
  try {
    const result = await run();
    if (result instanceof ReadableStream) await new Response(result).arrayBuffer();
  } catch (e) {
    failures.set(what, e);
    return;
  }
  throw new Error(`${what} did not fail`);
}

Deno.test("no hub failure puts the token in its error", async () => {
  const clock = new FakeClock();
  const open = await syntheticModel({ repo: "org/open", shards: 1, weightBytes: 4000 });
  const gated = await syntheticModel({
    repo: "org/gated",
    shards: 1,
    weightBytes: 4000,
    gated: "manual",
  });
  const hub = inProcessFakeHub({
    repos: [open, gated],
    tokens: [SECRET],
    now: () => clock.now(),
    signedUrlTtlSeconds: 1,
  });
  // Ages the signed URL between the hub's redirect and the CDN request.
  const aging: typeof fetch = (input, init) => {
    if (new URL(new Request(input).url).origin === hub.cdnOrigin) clock.advance(5_000);
    return hub.fetch(input, init);
  };
  const client = (fetcher: typeof fetch, token = SECRET) =>
    new HubClient({
      config: { endpoint: hub.endpoint, token: new HubToken(token) },
      fetch: fetcher,
    });
  const ok = client(hub.fetch);
  const snapshot = await ok.resolveRevision("org/open");
  const shard = snapshot.files.find((f) => f.sha256 !== undefined)!;
  const failures = new Map<string, unknown>();
  await failure("unknown repo", () => ok.resolveRevision("org/none"), failures);
  await failure("unknown revision", () => ok.resolveRevision("org/open", "v404"), failures);
  await failure("gated, not granted", () => ok.resolveRevision("org/gated"), failures);
  await failure("unknown file", () => ok.fileMetadata("org/open", "main", "nope.json"), failures);
  await failure("bad repo id", () => ok.resolveRevision("../etc"), failures);
  await failure(
    "expired CDN URL",
    () => client(aging).byteSource().read("org/open", snapshot.commit, shard, 0, 10, signal),
    failures,
  );
  await failure(
    "range past the end",
    () => ok.byteSource().read("org/open", snapshot.commit, shard, 0, shard.size + 1, signal),
    failures,
  );
  await failure(
    "invalid token",
    () => client(hub.fetch, `${SECRET}x`).resolveRevision("org/open"),
    failures,
  );
  const liar: typeof fetch = () => Promise.resolve(new Response("not json", { status: 200 }));
  await failure("malformed listing", () => client(liar).resolveRevision("org/open"), failures);
  const short: typeof fetch = () =>
    Promise.resolve(
      new Response("abc", { status: 206, headers: { "Content-Range": "bytes 0-9/" + shard.size } }),
    );
  await failure(
    "cut short",
    () => client(short).byteSource().read("org/open", snapshot.commit, shard, 0, 10, signal),
    failures,
  );
  const thrower: typeof fetch = () =>
    Promise.reject(new TypeError(`dns error for Bearer ${SECRET}`));
  await failure(
    "network error quoting the header",
    () => client(thrower).resolveRevision("org/open"),
    failures,
  );
  const real = startFakeHub({ repos: [open], tokens: [SECRET] });
  try {
    await real.offline();
    await failure(
      "offline",
      () =>
        new HubClient({ config: { endpoint: real.endpoint, token: new HubToken(SECRET) } })
          .resolveRevision("org/open"),
      failures,
    );
  } finally {
    await real.stop();
  }
  assertEquals(failures.size, 12);
  for (const [what, e] of failures) {
    assertOk(e instanceof HubError || e instanceof RangeError, `${what}: ${String(e)}`);
    assertNoToken(what, e);
  }
  assertNoToken("the client", ok);
  assertOk(
    !JSON.stringify({ endpoint: hub.endpoint, token: new HubToken(SECRET) }).includes(SECRET),
  );
  assertOk(!Deno.inspect(new HubToken(SECRET)).includes(SECRET));
  assertOk(!`${new HubToken(SECRET)}`.includes(SECRET));
});
