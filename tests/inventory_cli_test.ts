/**
 * `llmgw agent inventory --json` on the recorded machines, run as a real
 * process through main.ts with the production flags (design §5.5 seams).
 */
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { fixturePath, readFixture } from "./fixtures.ts";
import type { Inventory } from "../discovery/mod.ts";

const MAIN = fixturePath("../../main.ts");

async function llmgw(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-run", "--allow-read", "--allow-env", MAIN, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

const MACHINES = [
  "dgx_h100_8x_nics",
  "h100_sxm_vm",
  "h200_sxm_vm",
  "l40s_pcie_vm",
  "rtx4080super_workstation",
  "rtx4090_8x_server",
];

function fabricFlags(machine: string): string[] {
  const config = JSON.parse(readFixture(`machines/${machine}/agent.json`));
  return Object.entries(config.fabrics ?? {}).flatMap(([name, hcas]) => [
    "--fabric",
    `${name}=${(hcas as string[]).join(",")}`,
  ]);
}

for (const machine of MACHINES) {
  Deno.test(`agent inventory --json on ${machine} matches the reviewed output`, async () => {
    const dir = fixturePath(`machines/${machine}`);
    const r = await llmgw([
      "agent",
      "inventory",
      "--json",
      "--nvidia-smi",
      `${dir}/nvidia-smi`,
      "--sysfs-root",
      `${dir}/sysfs`,
      ...fabricFlags(machine),
    ]);
    assertEquals(r.stderr, "");
    assertEquals(r.code, 0);
    const expected = JSON.parse(readFixture(`machines/${machine}/expected_inventory.json`));
    assertEquals(JSON.parse(r.stdout), expected);
    // The config file gives the same answer as the flags.
    const viaConfig = await llmgw([
      "agent",
      "inventory",
      "--json",
      "--config",
      `${dir}/agent.json`,
    ]);
    assertEquals(JSON.parse(viaConfig.stdout), expected);
  });
}

Deno.test("recorded DGX H100: what the scheduler sees", () => {
  const inv = JSON.parse(
    readFixture("machines/dgx_h100_8x_nics/expected_inventory.json"),
  ) as Inventory;
  assertEquals(inv.source, "nvidia-smi");
  assertEquals(inv.gpus.map((g) => g.class), Array(8).fill("h100-80g"));
  // NV18 all-to-all; the NIC columns of the matrix are not NVLink.
  assertEquals(inv.gpus[0].nvlink_peers, [1, 2, 3, 4, 5, 6, 7]);
  assertEquals(inv.gpus.map((g) => g.numa_node), [0, 0, 0, 0, 1, 1, 1, 1]);
  // The recorded GPUs were busy and nvidia-smi listed no process: not free.
  assertOk(inv.gpus.every((g) => g.health.problems.length === 1));
  // Eight NDR adapters on the compute fabric; the storage adapters are down.
  assertEquals(inv.fabrics.length, 1);
  assertEquals(inv.fabrics[0].fabric, "ib-compute");
  assertEquals(inv.fabrics[0].hcas, [
    "mlx5_0",
    "mlx5_3",
    "mlx5_4",
    "mlx5_5",
    "mlx5_6",
    "mlx5_9",
    "mlx5_10",
    "mlx5_11",
  ]);
  assertEquals(inv.fabrics[0].rate_gbps, 400);
  assertStringIncludes(inv.warnings.join("|"), "fabric storage: no active port on this node");
});

Deno.test("recorded RoCE node: the RoCE v2 GID index reaches the fabric", () => {
  const inv = JSON.parse(readFixture("machines/h200_sxm_vm/expected_inventory.json")) as Inventory;
  // show_gids in openucx/ucx#10420: index 3 is RoCE v2 with 10.16.29.13.
  assertEquals(inv.fabrics[0].ports[0].roce_v2_gid_index, 3);
  assertEquals(inv.gpus[0].cuda_version, "13.3");
});

Deno.test("agent inventory prints a readable table by default", async () => {
  const dir = fixturePath("machines/l40s_pcie_vm");
  const r = await llmgw(["agent", "inventory", "--config", `${dir}/agent.json`]);
  assertEquals(r.code, 0);
  assertStringIncludes(r.stdout, "l40s-45g");
  assertStringIncludes(r.stdout, "roce-a");
  assertStringIncludes(r.stdout, "fabric ib-a: mlx5_1 port 1 is down");
});

Deno.test("agent inventory refuses bad flags with a clear message and no stack trace", async () => {
  const cases: [string[], string][] = [
    [["--fabric", "ib0"], 'Cannot parse --fabric "ib0": expected NAME=HCA'],
    [["--fabric", "a=mlx5_0", "--fabric", "b=mlx5_0"], "adapter mlx5_0 is assigned to both"],
    [["--timeout", "soon"], "--timeout must be a positive number of seconds"],
    [["--config", "/nonexistent/agent.json"], "cannot read --config /nonexistent/agent.json"],
    [
      ["--frobnicate"],
      "agent inventory: unknown flag --frobnicate; run 'llmgw agent inventory --help'",
    ],
    [["extra"], 'unexpected argument "extra"'],
  ];
  for (const [args, message] of cases) {
    const r = await llmgw(["agent", "inventory", ...args]);
    assertEquals(r.code, 2, args.join(" "));
    assertStringIncludes(r.stderr, message);
    assertOk(!r.stderr.includes("    at "), `stack trace for ${args.join(" ")}`);
  }
});

Deno.test("agent inventory names the field of a bad config file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cases: [string, string][] = [
      ["{", "not valid JSON"],
      ['{"fabrics": {"ib": "mlx5_0"}}', "at fabrics.ib"],
      ['{"sysfs": "/sys"}', "sysfs"],
      ['{"fabrics": {"bad name": ["mlx5_0"]}}', 'fabric name "bad name"'],
    ];
    for (const [text, message] of cases) {
      await Deno.writeTextFile(`${dir}/agent.json`, text);
      const r = await llmgw(["agent", "inventory", "--config", `${dir}/agent.json`]);
      assertEquals(r.code, 2, text);
      assertStringIncludes(r.stderr, message);
      assertStringIncludes(r.stderr, `${dir}/agent.json`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
