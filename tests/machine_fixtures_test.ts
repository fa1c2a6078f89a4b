/**
 * Guards the committed machine fixture trees (`tests/fixtures/machines/<m>/sysfs`
 * and `<m>/nvidia-smi`) against drift from the recorded samples they are
 * generated from: each machine is laid out afresh into a temp dir and compared
 * entry by entry (paths, file contents, symlink targets).
 *
 * @module
 */
import { join } from "node:path";
import { assertEquals, assertOk } from "./assert.ts";
import { layOutMachine, machineNames, MACHINES_DIR } from "./make_machine_fixtures.ts";

/** One entry of a tree, as seen without following symlinks. */
type Entry =
  | { kind: "dir" }
  | { kind: "file"; content: string }
  | { kind: "symlink"; target: string };

/** Every entry under `root`, keyed by its relative path, without following symlinks. */
async function snapshot(root: string): Promise<Record<string, Entry>> {
  const out: Record<string, Entry> = {};
  async function walk(rel: string): Promise<void> {
    for await (const e of Deno.readDir(join(root, rel))) {
      const relPath = rel === "" ? e.name : `${rel}/${e.name}`;
      const full = join(root, relPath);
      const info = await Deno.lstat(full);
      if (info.isSymlink) {
        out[relPath] = { kind: "symlink", target: await Deno.readLink(full) };
      } else if (info.isDirectory) {
        out[relPath] = { kind: "dir" };
        await walk(relPath);
      } else {
        out[relPath] = { kind: "file", content: await Deno.readTextFile(full) };
      }
    }
  }
  await walk("");
  // Sorted keys, so a difference shows up in a readable order.
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_machine_test_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Lays out a machine into `tmp`: a copy of its fixture.json there, so
 * layOutMachine writes both `sysfs/` and `nvidia-smi` into the temp dir and
 * the committed tree is only ever read.
 */
async function layOutCopy(name: string, tmp: string): Promise<void> {
  await Deno.copyFile(join(MACHINES_DIR, name, "fixture.json"), join(tmp, "fixture.json"));
  layOutMachine(tmp, join(tmp, "sysfs"), join(MACHINES_DIR, name));
}

const NAMES = machineNames();

Deno.test("machineNames lists the machines with a fixture.json", () => {
  assertEquals(NAMES, [
    "dgx_h100_8x_nics",
    "h100_sxm_vm",
    "h200_sxm_vm",
    "l40s_pcie_vm",
    "rtx4080super_workstation",
    "rtx4090_8x_server",
  ]);
});

for (const name of NAMES) {
  Deno.test(`machine fixture ${name}: committed sysfs tree matches its recorded sample`, async () => {
    await withTempDir(async (tmp) => {
      await layOutCopy(name, tmp);
      const committed = await snapshot(join(MACHINES_DIR, name, "sysfs"));
      const generated = await snapshot(join(tmp, "sysfs"));
      assertOk(Object.keys(generated).length > 0, "generated tree is empty");
      assertEquals(committed, generated);
    });
  });

  Deno.test(`machine fixture ${name}: committed nvidia-smi wrapper matches`, async () => {
    await withTempDir(async (tmp) => {
      await layOutCopy(name, tmp);
      const committedPath = join(MACHINES_DIR, name, "nvidia-smi");
      assertEquals(
        await Deno.readTextFile(committedPath),
        await Deno.readTextFile(join(tmp, "nvidia-smi")),
      );
      const mode = (await Deno.stat(committedPath)).mode;
      assertOk(mode !== null && (mode & 0o111) === 0o111, `${committedPath} is not executable`);
    });
  });
}

Deno.test("machine fixtures: the committed trees use the kernel's symlink layout", async () => {
  const dgx = await snapshot(join(MACHINES_DIR, "dgx_h100_8x_nics", "sysfs"));
  assertEquals(dgx["class/infiniband/mlx5_10"], {
    kind: "symlink",
    target: "../../devices/unrecorded/mlx5_10/infiniband/mlx5_10",
  });
  assertEquals(dgx["devices/unrecorded/mlx5_10/infiniband/mlx5_10/ports/1/state"], {
    kind: "file",
    content: "4: ACTIVE\n",
  });
  const island = await snapshot(join(MACHINES_DIR, "rtx4090_8x_server", "sysfs"));
  assertEquals(island, {
    README: { kind: "file", content: "No RDMA adapters: a single-node island.\n" },
  });
});

Deno.test("machine fixtures: the comparison notices drift", async () => {
  await withTempDir(async (tmp) => {
    await layOutCopy("h200_sxm_vm", tmp);
    const before = await snapshot(join(tmp, "sysfs"));
    const rate = "devices/unrecorded/mlx5_bond_0/infiniband/mlx5_bond_0/ports/1/rate";
    assertEquals(before[rate], { kind: "file", content: "100 Gb/sec (4X EDR)\n" });
    await Deno.writeTextFile(join(tmp, "sysfs", rate), "200 Gb/sec (4X HDR)\n");
    let changed = false;
    try {
      assertEquals(await snapshot(join(tmp, "sysfs")), before);
    } catch {
      changed = true;
    }
    assertOk(changed, "a changed file was not noticed");
    // A retargeted symlink is noticed too.
    const link = join(tmp, "sysfs/class/infiniband/mlx5_bond_0");
    await Deno.remove(link);
    await Deno.symlink("../../devices/elsewhere", link);
    assertEquals((await snapshot(join(tmp, "sysfs")))["class/infiniband/mlx5_bond_0"], {
      kind: "symlink",
      target: "../../devices/elsewhere",
    });
  });
});
