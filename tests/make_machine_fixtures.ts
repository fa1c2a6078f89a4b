/**
 * Lays out each machine fixture that names an adapter sample in its
 * `fixture.json`: writes its `sysfs/` tree from the recorded sample and its
 * `nvidia-smi` wrapper. Run after changing a sample:
 * `deno run --allow-read --allow-write tests/make_machine_fixtures.ts`.
 * machine_fixtures_test.ts checks that the committed trees match.
 *
 * @module
 */
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { loadIbSample, writeSysfsTree } from "./sysfs_tree.ts";

/** What a machine fixture's `fixture.json` says. */
export interface MachineFixture {
  /** The adapter sample under tests/fixtures/ib_sources, or null for a node without RDMA. */
  ib_sample: string | null;
}

/** The script every machine's `nvidia-smi` wrapper runs: it replays that machine's recordings. */
const REPLAY_SCRIPT = fileURLToPath(new URL("../dev/machines/fake_nvidia_smi.sh", import.meta.url));

/** The machines directory. */
export const MACHINES_DIR = fileURLToPath(new URL("./fixtures/machines/", import.meta.url));

/** Names of machine fixtures that have a fixture.json. */
export function machineNames(): string[] {
  return [...Deno.readDirSync(MACHINES_DIR)]
    .filter((e) => e.isDirectory && exists(join(MACHINES_DIR, e.name, "fixture.json")))
    .map((e) => e.name)
    .sort();
}

/**
 * Writes `<dir>/sysfs` (replacing it) and `<dir>/nvidia-smi` for one machine;
 * the wrapper finds the replay script relative to `home`, where the machine is committed.
 */
export function layOutMachine(
  dir: string,
  sysfsDir = join(dir, "sysfs"),
  home = dir,
): void {
  const fixture = JSON.parse(Deno.readTextFileSync(join(dir, "fixture.json"))) as MachineFixture;
  try {
    Deno.removeSync(sysfsDir, { recursive: true });
  } catch {
    // Not there yet.
  }
  Deno.mkdirSync(sysfsDir, { recursive: true });
  if (fixture.ib_sample === null) {
    Deno.writeTextFileSync(join(sysfsDir, "README"), "No RDMA adapters: a single-node island.\n");
  } else {
    writeSysfsTree(sysfsDir, loadIbSample(fixture.ib_sample));
  }
  Deno.writeTextFileSync(
    join(dir, "nvidia-smi"),
    "#!/bin/sh\n# Replays this machine's recorded nvidia-smi outputs (design §5.5).\n" +
      `exec "$(dirname "$0")/${relative(home, REPLAY_SCRIPT)}" "$(dirname "$0")" "$@"\n`,
    { mode: 0o755 },
  );
  Deno.chmodSync(join(dir, "nvidia-smi"), 0o755);
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** The simulated (derived) machines of `llmgw dev`. */
export const SIM_DIR = fileURLToPath(new URL("../dev/machines/", import.meta.url));

if (import.meta.main) {
  for (const root of [MACHINES_DIR, SIM_DIR]) {
    for (const e of [...Deno.readDirSync(root)].sort((a, b) => a.name.localeCompare(b.name))) {
      if (!e.isDirectory || !exists(join(root, e.name, "fixture.json"))) continue;
      layOutMachine(join(root, e.name));
      console.log(`laid out ${e.name}`);
    }
  }
}
