import { assertEquals, assertStringIncludes } from "../tests/assert.ts";
import { PortAllocator } from "./port_allocator.ts";
import { ownershipHint, takeBlock } from "./shard_ports.ts";

Deno.test("takeBlock: a held port is skipped and its holder named", async () => {
  const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (held.addr as Deno.NetAddr).port;
  try {
    const allocator = new PortAllocator({ from: port, to: port + 19 });
    const block = await takeBlock(allocator, "s1", (p) => p !== port, "/proc");
    assertEquals(block.ports[0], port + 1);
    assertEquals(block.ports.length, 10);
    assertStringIncludes(block.notice!, `port ${port} is held by pid ${Deno.pid}`);
    assertStringIncludes(block.notice!, `using ports from ${port + 1}`);
    const clean = await takeBlock(
      new PortAllocator({ from: 40_000, to: 40_009 }),
      "s2",
      () => true,
      "/proc",
    );
    assertEquals([clean.ports[0], clean.notice], [40_000, null]);
  } finally {
    held.close();
  }
});

Deno.test("ownershipHint: what a timeout says when the shard's socket was not found", () => {
  assertEquals(ownershipHint({ kind: "ours", pid: 1 }, 20_000), null);
  assertEquals(ownershipHint({ kind: "foreign", holders: [], ours: null }, 20_000), null);
  assertStringIncludes(
    ownershipHint({ kind: "none" }, 20_000)!,
    "nothing of the shard listens on port 20000",
  );
  assertStringIncludes(
    ownershipHint({ kind: "unknown", reason: "/proc/net/tcp: permission denied" }, 20_000)!,
    "cannot be read: /proc/net/tcp: permission denied",
  );
});
