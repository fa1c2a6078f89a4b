import { assertEquals, assertOk } from "../tests/assert.ts";
import { LogFollower, rotateIfLarge } from "./log_file.ts";

Deno.test("LogFollower reads what was appended, and starts over after a truncation", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/engine.log`;
    Deno.writeTextFileSync(path, "old run\n");
    const f = new LogFollower(path, Deno.statSync(path).size);
    assertEquals(f.read(), "");
    Deno.writeTextFileSync(path, "one\ntwo\n", { append: true });
    assertEquals(f.read(), "one\ntwo\n");
    Deno.truncateSync(path, 0);
    Deno.writeTextFileSync(path, "three\n", { append: true });
    assertEquals(f.read(), "three\n");
    // Far behind: only the last maxBytes are read.
    Deno.writeTextFileSync(path, "x".repeat(10_000), { append: true });
    assertEquals(f.read(100).length, 100);
    assertEquals(new LogFollower(`${dir}/missing`).read(), "");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("rotateIfLarge keeps N old files and truncates in place for an appending writer", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/engine.log`;
    const writer = await Deno.open(path, { append: true, create: true });
    const write = (t: string) => writer.writeSync(new TextEncoder().encode(t));
    for (let round = 1; round <= 4; round++) {
      write(`round ${round} ${"y".repeat(200)}\n`);
      assertOk(rotateIfLarge(path, 100, 2));
    }
    writer.close();
    assertEquals(Deno.statSync(path).size, 0);
    assertOk(Deno.readTextFileSync(`${path}.1`).startsWith("round 4"));
    assertOk(Deno.readTextFileSync(`${path}.2`).startsWith("round 3"));
    assertOk(!rotateIfLarge(path, 100, 2));
    let third = true;
    try {
      Deno.statSync(`${path}.3`);
    } catch {
      third = false;
    }
    assertOk(!third, "only two old files are kept");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
