import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { killLeftovers, readPids, settleWithin, survivorsAfter } from "../tests/proc_probe.ts";
import { discoverInventory, type DiscoveryOptions } from "./discover.ts";
import { clip } from "./nvidia_smi_csv.ts";
import { runCommand } from "./run_command.ts";
import type { Inventory } from "./types.ts";

const FAKE_SMI = fileURLToPath(new URL("../dev/machines/fake_nvidia_smi.sh", import.meta.url));
const MACHINES = fileURLToPath(new URL("../tests/fixtures/machines/", import.meta.url));
const MISC = fileURLToPath(new URL("../tests/fixtures/nvidia_smi_misc/", import.meta.url));

/** The header llmgw's own query produces, in GPU_QUERY_FIELDS order. */
const QUERY_HEADER = "index, uuid, name, memory.total [MiB], memory.used [MiB], compute_cap, " +
  "pci.bus_id, driver_version, temperature.gpu, ecc.errors.uncorrected.volatile.total";

/** A recorded machine as it is committed: its own wrapper and sysfs tree. */
function recorded(name: string, extra: DiscoveryOptions = {}): Promise<Inventory> {
  const dir = join(MACHINES, name);
  return discoverInventory({
    nvidiaSmi: join(dir, "nvidia-smi"),
    sysfsRoot: join(dir, "sysfs"),
    ...extra,
  });
}

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_discover_test_" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function writeScript(path: string, body: string): Promise<string> {
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}`);
  await Deno.chmod(path, 0o755);
  return path;
}

/** Single-quotes a path for sh. */
function sq(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/**
 * Copies a machine fixture's recorded outputs into `tmp/<name>` with a
 * wrapper that replays them from there, so a test can change one output.
 */
async function copyMachine(tmp: string, name: string): Promise<string> {
  const from = join(MACHINES, name);
  const dir = join(tmp, name);
  await Deno.mkdir(dir);
  for await (const entry of Deno.readDir(from)) {
    if (entry.isFile && entry.name !== "nvidia-smi") {
      await Deno.copyFile(join(from, entry.name), join(dir, entry.name));
    }
  }
  await writeScript(join(dir, "nvidia-smi"), `exec ${sq(FAKE_SMI)} ${sq(dir)} "$@"\n`);
  return dir;
}

/** Discovery on a copied machine, with the original's sysfs tree. */
function discoverCopy(dir: string, name: string, extra: DiscoveryOptions = {}) {
  return discoverInventory({
    nvidiaSmi: join(dir, "nvidia-smi"),
    sysfsRoot: join(MACHINES, name, "sysfs"),
    ...extra,
  });
}

function randomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  crypto.getRandomValues(out);
  return out;
}

function hasProblem(problems: string[], part: string): boolean {
  return problems.some((p) => p.includes(part));
}

function assertProblem(problems: string[], part: string): void {
  assertOk(hasProblem(problems, part), `no problem includes ${JSON.stringify(part)}: ${problems}`);
}

const H100_APP_PROBLEMS = [
  "memory held by a process that is not llmgw's: pid 11327 uses 2566 MiB",
  "memory held by a process that is not llmgw's: pid 11328 uses 1542 MiB",
  "memory held by a process that is not llmgw's: pid 11345 uses 15690 MiB",
];

Deno.test("discoverInventory reads a recorded H100 VM through its nvidia-smi and sysfs", async () => {
  const inv = await recorded("h100_sxm_vm");
  assertEquals(inv.source, "nvidia-smi");
  assertEquals(inv.problems, []);
  assertEquals(inv.gpus.length, 1);
  const gpu = inv.gpus[0];
  assertEquals(gpu.index, 0);
  assertEquals(gpu.name, "NVIDIA H100 80GB HBM3");
  assertEquals(gpu.class, "h100-80g");
  assertEquals(gpu.memory_total_mb, 81559);
  assertEquals(gpu.memory_used_mb, 0);
  assertEquals(gpu.compute_capability, "9.0");
  assertEquals(gpu.pci_bus_id, "0000:00:09.0");
  assertEquals(gpu.driver_version, "590.48.01");
  assertEquals(gpu.cuda_version, "13.1");
  assertEquals(gpu.nvlink_peers, []);
  // No numa_node in the sysfs tree for the GPU: the topo NUMA Affinity column.
  assertEquals(gpu.numa_node, 0);
  assertEquals(gpu.health.ecc_errors, 0);
  assertEquals(gpu.health.temperature_c, 41);
  // compute_apps.csv was recorded under load: three foreign processes.
  assertEquals(gpu.health.problems, H100_APP_PROBLEMS);
  assertOk(inv.hcas.length > 0, "hcas from the sysfs tree");
});

Deno.test("discoverInventory does not count llmgw's own pids as foreign memory", async () => {
  const all = await recorded("h100_sxm_vm", { ownPids: new Set([11327, 11328, 11345]) });
  assertEquals(all.gpus[0].health.problems, []);
  const some = await recorded("h100_sxm_vm", { ownPids: new Set([11328]) });
  assertEquals(some.gpus[0].health.problems, [H100_APP_PROBLEMS[0], H100_APP_PROBLEMS[2]]);
});

Deno.test("discoverInventory reads the CUDA version from the driver 610 --version format", async () => {
  const inv = await recorded("h200_sxm_vm");
  assertEquals(inv.source, "nvidia-smi");
  assertEquals(inv.gpus.map((g) => [g.class, g.cuda_version]), [["h200-140g", "13.3"]]);
});

Deno.test("discoverInventory reads NVLink peers of a recorded 8x H100", async () => {
  const inv = await recorded("dgx_h100_8x_nics");
  assertEquals(inv.source, "nvidia-smi");
  assertEquals(inv.gpus.map((g) => g.index), [0, 1, 2, 3, 4, 5, 6, 7]);
  for (const gpu of inv.gpus) {
    assertEquals(gpu.nvlink_peers, [0, 1, 2, 3, 4, 5, 6, 7].filter((i) => i !== gpu.index));
  }
});

Deno.test("discoverInventory drops a query field an old driver refuses and keeps the GPUs", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "h100_sxm_vm");
    await Deno.writeTextFile(join(dir, "invalid_fields"), "compute_cap\n");
    // The fake answers as an old driver does: the real message and exit 2.
    const direct = await runCommand(join(dir, "nvidia-smi"), [
      "--query-gpu=index,compute_cap",
      "--format=csv",
    ]);
    assertEquals(direct.code, 2);
    assertEquals(
      direct.stdout.trim(),
      (await Deno.readTextFile(join(MISC, "invalid_field_compute_cap.txt"))).trim(),
    );

    // From here on the wrapper also logs each call's arguments.
    const log = join(tmp, "calls.log");
    await writeScript(
      join(dir, "nvidia-smi"),
      `printf '%s\\n' "$*" >> ${sq(log)}\nexec ${sq(FAKE_SMI)} ${sq(dir)} "$@"\n`,
    );
    const queries = async () => {
      const calls = (await Deno.readTextFile(log)).split("\n").filter((l) => l !== "");
      await Deno.remove(log);
      return calls.filter((c) => c.startsWith("--query-gpu=")).map((c) =>
        c.slice("--query-gpu=".length).split(" ")[0].split(",")
      );
    };

    const inv = await discoverCopy(dir, "h100_sxm_vm");
    assertEquals(inv.source, "nvidia-smi");
    assertProblem(inv.problems, "does not support field compute_cap");
    const asked = await queries();
    assertEquals(asked.length, 2);
    assertOk(asked[0].includes("compute_cap"));
    assertEquals(asked[1], asked[0].filter((f) => f !== "compute_cap"));
    assertEquals(inv.gpus.length, 1);
    // The retry asked without compute_cap; the fake replays the whole
    // recorded table whatever was asked, so the GPU row itself is unchanged.
    assertEquals(inv.gpus[0].class, "h100-80g");

    await Deno.writeTextFile(
      join(dir, "invalid_fields"),
      "compute_cap ecc.errors.uncorrected.volatile.total\n",
    );
    const two = await discoverCopy(dir, "h100_sxm_vm");
    assertEquals(two.source, "nvidia-smi");
    assertProblem(two.problems, "does not support field compute_cap");
    assertProblem(two.problems, "does not support field ecc.errors.uncorrected.volatile.total");
    const askedTwice = await queries();
    assertEquals(askedTwice.length, 3);
    assertOk(!askedTwice[2].includes("compute_cap"));
    assertOk(!askedTwice[2].includes("ecc.errors.uncorrected.volatile.total"));
    assertOk(askedTwice[2].includes("index") && askedTwice[2].includes("memory.total"));
    assertEquals(two.gpus.length, 1);
    assertEquals(two.gpus[0].class, "h100-80g");
  });
});

Deno.test("discoverInventory with no nvidia-smi reports no backend but still reads HCAs", async () => {
  await withTempDir(async (tmp) => {
    const sysfs = join(MACHINES, "h100_sxm_vm", "sysfs");
    const inv = await discoverInventory({
      nvidiaSmi: join(tmp, "bin", "nvidia-smi"),
      sysfsRoot: sysfs,
    });
    assertEquals(inv.source, "none");
    assertEquals(inv.gpus, []);
    assertProblem(inv.problems, "no NVIDIA backend");
    const withSmi = await recorded("h100_sxm_vm");
    assertOk(inv.hcas.length > 0);
    assertEquals(inv.hcas, withSmi.hcas);
  });
});

Deno.test("discoverInventory reports nvidia-smi's driver failure without throwing", async () => {
  await withTempDir(async (tmp) => {
    const cases: [file: string, code: number][] = [
      ["smi_failed_driver_communication.txt", 9],
      ["smi_failed_libnvidia_ml_not_found.txt", 12],
      ["smi_failed_nvml_version_mismatch.txt", 18],
    ];
    for (const [file, code] of cases) {
      const fixture = join(MISC, file);
      const smi = await writeScript(join(tmp, `smi_${code}`), `cat ${sq(fixture)}\nexit ${code}\n`);
      const inv = await discoverInventory({ nvidiaSmi: smi, sysfsRoot: join(tmp, "nosys") });
      assertEquals(inv.source, "nvidia-smi-failed", file);
      assertEquals(inv.gpus, [], file);
      const text = await Deno.readTextFile(fixture);
      assertProblem(inv.problems, `exited with code ${code}`);
      assertProblem(inv.problems, clip(text, 200));
    }
    const driver = await Deno.readTextFile(join(MISC, "smi_failed_driver_communication.txt"));
    assertStringIncludes(driver, "couldn't communicate with the NVIDIA driver");
  });
});

Deno.test("discoverInventory gives up on a hung nvidia-smi and leaves no process", async () => {
  await withTempDir(async (tmp) => {
    const pidFile = join(tmp, "pids");
    const smi = await writeScript(
      join(tmp, "nvidia-smi"),
      `echo $$ >> ${sq(pidFile)}\nsleep 300\n`,
    );
    try {
      // A generous bound: four 300 ms deadlines run in parallel.
      const result = await settleWithin(
        discoverInventory({ nvidiaSmi: smi, sysfsRoot: join(tmp, "nosys"), timeoutMs: 300 }),
        10_000,
        () => killLeftovers(readPids(pidFile), readPids(pidFile)),
      );
      assertOk(result.ok, `discovery threw: ${!result.ok && result.error}`);
      const inv = result.value;
      assertEquals(inv.source, "nvidia-smi-failed");
      assertEquals(inv.gpus, []);
      assertProblem(inv.problems, "did not finish");
      // Four calls run at once: --query-gpu, --query-compute-apps, topo, --version.
      const pids = readPids(pidFile);
      assertEquals(pids.length, 4, `recorded pids: ${pids}`);
      assertEquals(await survivorsAfter(pids, pids), []);
    } finally {
      killLeftovers(readPids(pidFile), readPids(pidFile));
    }
  });
});

Deno.test("discoverInventory keeps the GPUs when only topo -m hangs", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "dgx_h100_8x_nics");
    const pidFile = join(tmp, "pids");
    await writeScript(
      join(dir, "nvidia-smi"),
      `case "$1" in\n  topo) echo $$ >> ${sq(pidFile)}; sleep 300 ;;\n` +
        `  *) exec ${sq(FAKE_SMI)} ${sq(dir)} "$@" ;;\nesac\n`,
    );
    try {
      const result = await settleWithin(
        discoverCopy(dir, "dgx_h100_8x_nics", { timeoutMs: 300 }),
        10_000,
        () => killLeftovers(readPids(pidFile), readPids(pidFile)),
      );
      assertOk(result.ok, `discovery threw: ${!result.ok && result.error}`);
      const inv = result.value;
      assertEquals(inv.source, "nvidia-smi");
      assertEquals(inv.gpus.length, 8);
      assertProblem(inv.problems, "nvidia-smi topo -m");
      assertProblem(inv.problems, "did not finish");
      for (const gpu of inv.gpus) assertEquals(gpu.nvlink_peers, []);
      const pids = readPids(pidFile);
      assertEquals(pids.length, 1);
      assertEquals(await survivorsAfter(pids, pids), []);
    } finally {
      killLeftovers(readPids(pidFile), readPids(pidFile));
    }
  });
});

Deno.test("discoverInventory survives random bytes from every nvidia-smi call", async () => {
  await withTempDir(async (tmp) => {
    for (let round = 0; round < 5; round++) {
      const garbage = join(tmp, `garbage_${round}`);
      await Deno.writeFile(garbage, randomBytes(4096));
      const smi = await writeScript(join(tmp, `smi_${round}`), `cat ${sq(garbage)}\nexit 0\n`);
      const inv = await discoverInventory({ nvidiaSmi: smi, sysfsRoot: join(tmp, "nosys") });
      assertEquals(inv.gpus, []);
      assertOk(inv.problems.length > 0, "garbage must be a problem");
      // Nearly always the header is unreadable; a stray short line that
      // happens to look like a header leaves a table without an index column.
      if (inv.source !== "nvidia-smi-failed") {
        assertProblem(inv.problems, "no index column");
      }
      for (const p of inv.problems) assertOk(p.length < 400, `problem not clipped: ${p.length}`);
    }
  });
});

Deno.test("discoverInventory reads a real header followed by garbage rows", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "h100_sxm_vm");
    const csv = await Deno.readTextFile(join(dir, "query_gpu.csv"));
    const header = new TextEncoder().encode(csv.split("\n")[0] + "\n");
    const body = randomBytes(4096).map((b) => (b === 0x2c ? 0x20 : b)); // no commas
    await Deno.writeFile(join(dir, "query_gpu.csv"), new Uint8Array([...header, ...body]));
    const inv = await discoverCopy(dir, "h100_sxm_vm");
    assertEquals(inv.gpus, []);
    assertProblem(inv.problems, "nvidia-smi --query-gpu output line 2: expected 212 values");
    for (const p of inv.problems) assertOk(p.length < 400, `problem not clipped: ${p.length}`);
  });
});

Deno.test("discoverInventory reports a truncated query CSV by line", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "h100_sxm_vm");
    const csv = await Deno.readTextFile(join(dir, "query_gpu.csv"));
    const [header, row] = csv.split("\n");
    assertEquals(header.split(",").length, 212);
    await Deno.writeTextFile(
      join(dir, "query_gpu.csv"),
      `${header}\n${row.slice(0, Math.floor(row.length / 2))}`,
    );
    const inv = await discoverCopy(dir, "h100_sxm_vm");
    assertEquals(inv.gpus, []);
    assertProblem(inv.problems, "nvidia-smi --query-gpu output line 2: expected 212 values, got");
  });
});

Deno.test("discoverInventory keeps the complete rows of a CSV cut mid-row", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "dgx_h100_8x_nics");
    const csv = await Deno.readTextFile(join(dir, "query_gpu.csv"));
    const cut = csv.indexOf("5, NVIDIA H100 80GB HBM3") + "5, NVIDIA H100".length;
    await Deno.writeTextFile(join(dir, "query_gpu.csv"), csv.slice(0, cut));
    const inv = await discoverCopy(dir, "dgx_h100_8x_nics");
    assertEquals(inv.source, "nvidia-smi");
    assertEquals(inv.gpus.map((g) => g.index), [0, 1, 2, 3, 4]);
    assertOk(inv.gpus.every((g) => g.class === "h100-80g"));
    assertProblem(inv.problems, "nvidia-smi --query-gpu output line 7: expected 5 values, got 2");
  });
});

Deno.test("discoverInventory keeps the GPUs when topo -m prints garbage", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "dgx_h100_8x_nics");
    await Deno.writeFile(join(dir, "topo.txt"), randomBytes(4096));
    const inv = await discoverCopy(dir, "dgx_h100_8x_nics");
    assertEquals(inv.source, "nvidia-smi");
    assertEquals(inv.gpus.length, 8);
    assertProblem(inv.problems, "Cannot parse nvidia-smi topo -m");
    for (const gpu of inv.gpus) {
      assertEquals(gpu.nvlink_peers, []);
      assertEquals(gpu.class, "h100-80g");
    }
  });
});

Deno.test("discoverInventory reports a GPU nvidia-smi cannot reach and keeps the others", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "dgx_h100_8x_nics");
    const lines = (await Deno.readTextFile(join(dir, "query_gpu.csv"))).split("\n");
    const at = lines.findIndex((l) => l.startsWith("3, "));
    lines[at] = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error";
    await Deno.writeTextFile(join(dir, "query_gpu.csv"), lines.join("\n"));
    const inv = await discoverCopy(dir, "dgx_h100_8x_nics");
    assertEquals(inv.source, "nvidia-smi");
    assertEquals(inv.gpus.map((g) => g.index), [0, 1, 2, 4, 5, 6, 7]);
    assertProblem(inv.problems, "GPU at PCI 0000:3b:00.0 is inaccessible: Unknown Error");
    assertOk(!hasProblem(inv.problems, "expected 5 values"), `${inv.problems}`);
  });
});

Deno.test("discoverInventory turns error-state cells into health problems, [N/A] into null", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "h100_sxm_vm");
    await Deno.remove(join(dir, "compute_apps.csv"));
    await Deno.writeTextFile(
      join(dir, "query_gpu.csv"),
      [
        QUERY_HEADER,
        "0, GPU-a, NVIDIA H100 80GB HBM3, 81559 MiB, 0 MiB, 9.0, 00000000:18:00.0, 590.48.01, 41, 0",
        "1, GPU-b, NVIDIA H100 80GB HBM3, [Unknown Error], [GPU requires reset], 9.0, " +
        "00000000:2A:00.0, 590.48.01, 40, 0",
        "2, GPU-c, NVIDIA H100 80GB HBM3, 81559 MiB, 0 MiB, [N/A], 00000000:3A:00.0, 590.48.01, " +
        "[N/A], [N/A]",
        "",
      ].join("\n"),
    );
    const inv = await discoverCopy(dir, "h100_sxm_vm");
    assertEquals(inv.source, "nvidia-smi");
    assertEquals(inv.problems, []);
    assertEquals(inv.gpus.map((g) => g.index), [0, 1, 2]);
    const [ok, broken, na] = inv.gpus;

    assertEquals(ok.health.problems, []);
    assertEquals(ok.class, "h100-80g");

    assertEquals(broken.memory_total_mb, null);
    assertEquals(broken.memory_used_mb, null);
    assertEquals(broken.class, null);
    assertProblem(broken.health.problems, "memory.total in an error state: [Unknown Error]");
    assertProblem(broken.health.problems, "memory.used in an error state: [GPU requires reset]");
    assertEquals(broken.pci_bus_id, "0000:2a:00.0");

    assertEquals(na.health.problems, []);
    assertEquals(na.compute_capability, null);
    assertEquals(na.health.temperature_c, null);
    assertEquals(na.health.ecc_errors, null);
    assertEquals(na.class, "h100-80g");
  });
});

Deno.test("discoverInventory reports uncorrected ECC errors as a health problem", async () => {
  await withTempDir(async (tmp) => {
    const dir = await copyMachine(tmp, "h100_sxm_vm");
    await Deno.remove(join(dir, "compute_apps.csv"));
    await Deno.writeTextFile(
      join(dir, "query_gpu.csv"),
      `${QUERY_HEADER}\n` +
        "0, GPU-a, NVIDIA H100 80GB HBM3, 81559 MiB, 0 MiB, 9.0, 00000000:18:00.0, 590.48.01, 41, 2\n",
    );
    const inv = await discoverCopy(dir, "h100_sxm_vm");
    assertEquals(inv.gpus.length, 1);
    assertEquals(inv.gpus[0].health.ecc_errors, 2);
    assertEquals(inv.gpus[0].health.problems, ["uncorrected ECC errors: 2 (volatile count)"]);
  });
});

/** An nvidia-smi that prints `query` for --query-gpu (exiting `code`) and nothing useful otherwise. */
async function scriptedSmi(dir: string, query: string, code: number): Promise<string> {
  await Deno.writeTextFile(join(dir, "query.txt"), query);
  return await writeScript(
    join(dir, "nvidia-smi"),
    `case "$1" in\n  --query-gpu=*) cat ${sq(join(dir, "query.txt"))}; exit ${code} ;;\n` +
      `  --query-compute-apps=*) echo "gpu_uuid, pid, used_memory [MiB]" ;;\n  *) exit 1 ;;\nesac\n`,
  );
}

const H100_ROW = (i: number) =>
  `${i}, GPU-${i}, NVIDIA H100 80GB HBM3, 81559 MiB, 1 MiB, 9.0, 00000000:${
    (0x18 + i).toString(16)
  }:00.0, 570.86.15, 30, 0`;

Deno.test("discoverInventory keeps the listed GPUs when a lost GPU makes nvidia-smi fail", async () => {
  await withTempDir(async (dir) => {
    const text = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n" +
      `${QUERY_HEADER}\n${[0, 1, 2].map(H100_ROW).join("\n")}\n`;
    const inv = await discoverInventory({
      nvidiaSmi: await scriptedSmi(dir, text, 15),
      sysfsRoot: dir,
    });
    assertEquals(inv.source, "nvidia-smi");
    assertEquals(inv.gpus.map((g) => g.index), [0, 1, 2]);
    assertProblem(inv.problems, "GPU at PCI 0000:3b:00.0 is inaccessible: Unknown Error");
    assertProblem(inv.problems, "exited with code 15");
  });
});

Deno.test("discoverInventory drops a row cut off by a crash", async () => {
  await withTempDir(async (dir) => {
    // Died while printing GPU 2's memory: "815" of "81559 MiB", no newline.
    const text = `${QUERY_HEADER}\n${H100_ROW(0)}\n${
      H100_ROW(1)
    }\n2, GPU-2, NVIDIA H100 80GB HBM3, 815`;
    const inv = await discoverInventory({
      nvidiaSmi: await scriptedSmi(dir, text, 139),
      sysfsRoot: dir,
    });
    assertEquals(inv.gpus.map((g) => g.class), ["h100-80g", "h100-80g"]);
    assertProblem(inv.problems, "ends in an incomplete line");
  });
});
