import { assertEquals, assertOk } from "../../tests/assert.ts";
import { treeBytes } from "./tree_bytes.ts";

Deno.test("tree bytes: allocated blocks of files and folders, links not followed", async () => {
  const root = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${root}/t/a/b`, { recursive: true });
    await Deno.writeFile(`${root}/t/a/b/f`, new Uint8Array(10_000));
    await Deno.writeFile(`${root}/big`, new Uint8Array(1_000_000));
    await Deno.symlink(`${root}/big`, `${root}/t/link`);
    const n = await treeBytes(`${root}/t`);
    assertOk(n.complete && n.bytes >= 10_000 && n.bytes < 1_000_000, JSON.stringify(n));
    assertEquals(await treeBytes(`${root}/absent`), { bytes: 0, complete: true });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("tree bytes: a walk stops at its time bound, counts what it saw and says it was cut", async () => {
  const root = await Deno.makeTempDir();
  try {
    await Deno.mkdir(`${root}/d`);
    for (let i = 0; i < 4; i++) await Deno.writeFile(`${root}/d/f${i}`, new Uint8Array(10_000));
    const all = await treeBytes(root);
    assertEquals(all.complete, true);
    // A clock that moves one ms each time the walk reads it: the bound passes inside the subfolder.
    let t = 0;
    const cut = await treeBytes(root, { now: () => t++, stopAtMs: 2 });
    assertOk(cut.bytes > 0 && cut.bytes < all.bytes, `${cut.bytes} of ${all.bytes}`);
    assertEquals(cut.complete, false, "cut in a subfolder: the whole walk is incomplete");
    assertEquals(await treeBytes(root, { now: () => 0, stopAtMs: 2 }), all);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("tree bytes: a walk stops between two entries once its signal is aborted", async () => {
  const root = await Deno.makeTempDir();
  try {
    for (let i = 0; i < 4; i++) await Deno.writeFile(`${root}/f${i}`, new Uint8Array(10_000));
    const all = await treeBytes(root);
    const stop = new AbortController();
    // Aborted during the walk (at its second look at the clock): the next entry is not looked at.
    let looks = 0;
    const now = () => {
      if (++looks === 2) stop.abort();
      return 0;
    };
    const cut = await treeBytes(root, { now, stopAtMs: 1 }, stop.signal);
    assertOk(cut.bytes > 0 && cut.bytes < all.bytes, `${cut.bytes} of ${all.bytes}`);
    assertEquals(cut.complete, false);
    assertEquals(await treeBytes(root, undefined, stop.signal), { bytes: 0, complete: false });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
