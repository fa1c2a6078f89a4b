import { assertEquals, assertOk, assertRejects } from "../../tests/assert.ts";
import { FakeClock } from "../../tests/fake_clock.ts";
import { inProcessFakeHub, startFakeHub } from "./fake_hub_server.ts";
import { syntheticModel } from "./synthetic_model.ts";

Deno.test("over sockets, an LFS file redirects to the CDN on its own port", async () => {
  const repo = await syntheticModel({ repo: "org/m", shards: 1, weightBytes: 100_000 });
  const hub = startFakeHub({ repos: [repo] });
  try {
    const shard = repo.commits[repo.refs.main].find((f) => f.sha256 !== undefined)!;
    const followed = await fetch(`${hub.endpoint}/org/m/resolve/main/${shard.path}`, {
      headers: { Range: "bytes=0-99" },
    });
    assertEquals(followed.status, 206);
    assertEquals(new URL(followed.url).origin, hub.cdnOrigin);
    assertEquals((await followed.arrayBuffer()).byteLength, 100);
    assertOk(hub.ports[0] !== hub.ports[1]);
    const counts = hub.counters.snapshot();
    assertEquals([counts.byKind.resolve.requests, counts.byKind.cdn.requests], [1, 1]);
  } finally {
    await hub.stop();
  }
});

Deno.test("switching off breaks a transfer in flight and refuses connections; switching on listens on the same ports", async () => {
  const repo = await syntheticModel({ repo: "org/m", shards: 1, weightBytes: 4_000_000 });
  const hub = startFakeHub({ repos: [repo] });
  try {
    const shard = repo.commits[repo.refs.main].find((f) => f.sha256 !== undefined)!;
    const response = await fetch(`${hub.endpoint}/org/m/resolve/main/${shard.path}`);
    const reader = response.body!.getReader();
    await reader.read();
    const ports = hub.ports;
    await hub.offline();
    await assertRejects(async () => {
      for (let i = 0; i < 1000; i++) if ((await reader.read()).done) return;
    }, Error);
    const refused = await assertRejects(() => fetch(`${hub.endpoint}/api/models/org/m`), TypeError);
    assertOk(/connection refused/i.test(String(refused.cause)), String(refused.cause));
    hub.online();
    assertEquals(hub.ports, ports);
    const again = await fetch(`${hub.endpoint}/api/models/org/m`);
    assertEquals(again.status, 200);
    await again.body?.cancel();
  } finally {
    await hub.stop();
  }
});

Deno.test("the bandwidth cap paces hub and CDN bytes together", async () => {
  const clock = new FakeClock(0);
  const repo = await syntheticModel({ repo: "org/m", shards: 2, weightBytes: 1_000_000 });
  const hub = inProcessFakeHub({
    repos: [repo],
    bytesPerSecond: 100_000,
    bandwidthClock: { now: () => clock.now(), sleep: (ms) => Promise.resolve(clock.advance(ms)) },
  });
  let sent = 0;
  for (const file of repo.commits[repo.refs.main]) {
    let response = await hub.fetch(`${hub.endpoint}/org/m/resolve/main/${file.path}`, {
      redirect: "manual",
    });
    if (response.status === 302) {
      sent += (await response.arrayBuffer()).byteLength;
      response = await hub.fetch(response.headers.get("Location")!);
    }
    sent += (await response.arrayBuffer()).byteLength;
  }
  const counts = hub.counters.snapshot();
  assertEquals(counts.totalBytes, sent);
  assertEquals(hub.bandwidth.granted, sent);
  // Back to back from an empty bucket: every byte waits its share of the rate.
  assertOk(
    Math.abs(hub.bandwidth.waitedMs - (sent * 1000) / 100_000) < 1e-6,
    `${hub.bandwidth.waitedMs} ms`,
  );
  assertEquals(clock.now(), hub.bandwidth.waitedMs);
});
