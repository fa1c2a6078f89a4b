import { join } from "node:path";
import { assertEquals } from "../tests/assert.ts";
import { ShardLog } from "./shard_log.ts";

Deno.test("ShardLog: follows the file, scrubs before keeping, hands each line on once, rotates", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-shard-log-" });
  try {
    const path = join(dir, "engine.log");
    const seen: string[] = [];
    const log = new ShardLog({
      tailLimits: { maxLines: 10, maxBytes: 1_000 },
      maxBytes: 40,
      keep: 1,
      scrub: (t) => t.replaceAll("sk-secret", "***"),
      onLine: (l) => seen.push(l),
    });
    Deno.writeTextFileSync(path, "from a previous run\n");
    log.followFromEnd(path);
    Deno.writeTextFileSync(path, "key sk-secret\nhalf", { append: true });
    log.read();
    assertEquals(log.last(10), ["key ***"]);
    Deno.writeTextFileSync(path, " line\n" + "x".repeat(40) + "\n", { append: true });
    // Past 40 bytes: drained, copied to engine.log.1, truncated, followed from its start.
    assertEquals(log.rotate(), path);
    assertEquals(Deno.readTextFileSync(path), "");
    Deno.writeTextFileSync(path, "after\n", { append: true });
    log.read();
    assertEquals(seen, ["key ***", "half line", "x".repeat(40), "after"]);
    assertEquals(log.window().lines, seen);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
