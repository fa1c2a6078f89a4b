/** The suite's port plan: one range per file, none shared, none where the kernel hands out ports. */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { assertEquals, assertOk, assertThrows } from "./assert.ts";
import {
  freePortsIn,
  overlaps,
  PORT_PLAN,
  portBlock,
  PortPlanError,
  portsOf,
} from "./port_plan.ts";
import { MIN_PORT } from "../supervisor/port_allocator.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

/** The first port of this machine's ephemeral range (Linux's default where /proc has none). */
function ephemeralStart(): number {
  try {
    const text = Deno.readTextFileSync("/proc/sys/net/ipv4/ip_local_port_range");
    return Number(text.trim().split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
}

Deno.test("port plan: no two files share a port", () => {
  assertEquals(overlaps(PORT_PLAN), []);
});

Deno.test("port plan: an overlap is named with both files and the shared ports", () => {
  assertEquals(
    overlaps({
      "a_test.ts": { from: 100, to: 199 },
      "b_test.ts": { from: 300, to: 399 },
      "c_test.ts": { from: 150, to: 349 },
    }),
    ["a_test.ts and c_test.ts share 150-199", "c_test.ts and b_test.ts share 300-349"],
  );
});

Deno.test("port plan: every range lies between the unprivileged ports and the ephemeral range", () => {
  const limit = ephemeralStart();
  for (const [file, r] of Object.entries(PORT_PLAN)) {
    assertOk(r.from >= MIN_PORT && r.from <= r.to && r.to < limit, `${file}: ${r.from}-${r.to}`);
  }
});

Deno.test("port plan: each file named exists and takes its range from the plan", () => {
  for (const file of Object.keys(PORT_PLAN)) {
    const text = Deno.readTextFileSync(join(ROOT, file));
    assertOk(text.includes("portsOf(import.meta.url)"), `${file} calls portsOf(import.meta.url)`);
  }
});

Deno.test("port plan: a file outside the plan is refused, by name", () => {
  assertThrows(
    () => portsOf(import.meta.url),
    PortPlanError,
    "Cannot give ports to tests/port_plan_test.ts: it has no range in tests/port_plan.ts",
  );
  assertEquals(portsOf(new URL("./cluster_test.ts", import.meta.url).href), {
    ...PORT_PLAN["tests/cluster_test.ts"],
  });
});

Deno.test("port plan: blocks of a range, and none past its end", () => {
  const r = { from: 1000, to: 1399 };
  assertEquals(portBlock(r, 0), { from: 1000, to: 1199 });
  assertEquals(portBlock(r, 1), { from: 1200, to: 1399 });
  assertEquals(portBlock(r, 3, 100), { from: 1300, to: 1399 });
  assertThrows(() => portBlock(r, 2), PortPlanError, "block 2 of 200 ports: range 1000-1399");
  assertThrows(() => portBlock(r, -1), PortPlanError, "block -1");
});

Deno.test("port plan: free ports of a range skip a held one, and too few is an error", () => {
  const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = held.addr.port;
  try {
    const [first] = freePortsIn({ from: port, to: Math.min(port + 50, 65535) }, 1);
    assertOk(first > port, `${first} is past the held ${port}`);
    assertThrows(
      () => freePortsIn({ from: port, to: port }, 1),
      PortPlanError,
      `Cannot find 1 free ports in ${port}-${port}: 0 are free`,
    );
  } finally {
    held.close();
  }
});
