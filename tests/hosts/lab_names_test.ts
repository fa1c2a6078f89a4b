import fc from "fast-check";
import { assertEquals, assertOk, assertThrows } from "../assert.ts";
import {
  bridgeName,
  checkHostName,
  checkNetworkName,
  hostLinkName,
  hostNamespace,
  IFNAME_MAX,
  LabNameError,
  labPrefix,
  MAX_HOSTS,
  MAX_NETWORKS,
  MAX_PID,
  MAX_SERIAL,
  pidOfLabName,
  prefixOfLabName,
  switchLinkName,
  switchNamespace,
} from "./lab_names.ts";

const pid = fc.integer({ min: 1, max: MAX_PID });
const serial = fc.integer({ min: 0, max: MAX_SERIAL });

Deno.test("labPrefix: a table of pids and serials", () => {
  for (
    const [p, s, want] of [
      [1, 0, "lg1-00"],
      [35, 35, "lgz-0z"],
      [36, 36, "lg10-10"],
      [MAX_PID, MAX_SERIAL, "lg2hwcg-zz"],
    ] as const
  ) {
    assertEquals(labPrefix(p, s), want);
  }
});

Deno.test("labPrefix refuses a pid or serial out of range, naming it", () => {
  assertThrows(() => labPrefix(0, 0), LabNameError, "pid must be an integer in 1…4194304, got 0");
  assertThrows(() => labPrefix(MAX_PID + 1, 0), LabNameError, "got 4194305");
  assertThrows(() => labPrefix(1.5, 0), LabNameError, "got 1.5");
  assertThrows(() => labPrefix(1, MAX_SERIAL + 1), LabNameError, "too many labs");
});

Deno.test("every name a lab makes gives back its pid and prefix", () => {
  fc.assert(
    fc.property(pid, serial, fc.nat(MAX_NETWORKS - 1), fc.nat(MAX_HOSTS - 1), (p, s, n, h) => {
      const prefix = labPrefix(p, s);
      const names = [
        hostNamespace(prefix, "agent-1"),
        switchNamespace(prefix),
        bridgeName(prefix, n),
        hostLinkName(prefix, n),
        switchLinkName(prefix, n, h),
      ];
      for (const name of names) {
        assertEquals(pidOfLabName(name), p, name);
        assertEquals(prefixOfLabName(name), prefix, name);
      }
    }),
  );
});

Deno.test("link names fit the kernel's 15 bytes for the largest pid, serial, network and host", () => {
  fc.assert(
    fc.property(pid, serial, fc.nat(MAX_NETWORKS - 1), fc.nat(MAX_HOSTS - 1), (p, s, n, h) => {
      const prefix = labPrefix(p, s);
      for (
        const name of [bridgeName(prefix, n), hostLinkName(prefix, n), switchLinkName(prefix, n, h)]
      ) {
        assertOk(name.length <= IFNAME_MAX, `${name} is ${name.length} bytes`);
      }
    }),
  );
  assertEquals(
    switchLinkName(labPrefix(MAX_PID, MAX_SERIAL), MAX_NETWORKS - 1, MAX_HOSTS - 1).length,
    14,
  );
});

Deno.test("two labs' prefixes never start one another: a leftover check of one never sees the other", () => {
  fc.assert(fc.property(pid, serial, pid, serial, (p1, s1, p2, s2) => {
    fc.pre(p1 !== p2 || s1 !== s2);
    const a = labPrefix(p1, s1);
    const b = labPrefix(p2, s2);
    for (const name of [hostNamespace(b, "a"), hostLinkName(b, 0), switchLinkName(b, 1, 2)]) {
      assertOk(!name.startsWith(a), `${name} starts with ${a}`);
    }
  }));
});

Deno.test("pidOfLabName: not a lab's name, or a custom pattern", () => {
  for (const name of ["lo", "eth0", "lg", "lg-00", "lgabc-0", "lgabcdef-00-a", "xlg1-00-a"]) {
    assertEquals(pidOfLabName(name), null, name);
  }
  assertEquals(pidOfLabName("mylab-zz-a", /^mylab-(?<pid>[0-9a-z]+)-/), 35 * 36 + 35);
  assertEquals(pidOfLabName("mylab-zz-a", /^mylab-([0-9a-z]+)-/), null);
});

Deno.test("host and network names: what is refused says why", () => {
  assertEquals(checkHostName("agent-1"), "agent-1");
  assertEquals(checkNetworkName("fabric_0"), "fabric_0");
  assertThrows(() => checkHostName("switch"), LabNameError, "the lab's switch namespace");
  for (const bad of ["", "A", "1a", "a b", "a/b", "a".repeat(33)]) {
    assertThrows(() => checkHostName(bad), LabNameError, "a host name is a lower-case letter");
    assertThrows(
      () => checkNetworkName(bad),
      LabNameError,
      "a network name is a lower-case letter",
    );
  }
  assertThrows(() => bridgeName("lg1-00", MAX_NETWORKS), LabNameError, "at most 36 networks");
  assertThrows(() => switchLinkName("lg1-00", 0, MAX_HOSTS), LabNameError, "at most 1296 hosts");
  assertThrows(() => hostLinkName("lg123456789-00", 0), LabNameError, "longer than 15 bytes");
});
