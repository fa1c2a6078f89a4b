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
    assertOk(n >= 10_000 && n < 1_000_000, String(n));
    assertEquals(await treeBytes(`${root}/absent`), 0);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("tree bytes: a walk stops at its time bound and counts what it saw", async () => {
  const root = await Deno.makeTempDir();
  try {
    for (let i = 0; i < 4; i++) await Deno.writeFile(`${root}/f${i}`, new Uint8Array(10_000));
    const all = await treeBytes(root);
    // A clock that moves one ms each time the walk reads it: the bound passes after the second look.
    let t = 0;
    const cut = await treeBytes(root, { now: () => t++, stopAtMs: 2 });
    assertOk(cut > 0 && cut < all, `${cut} of ${all}`);
    assertEquals(await treeBytes(root, { now: () => 0, stopAtMs: 2 }), all);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
