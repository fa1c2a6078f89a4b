/** Choosing the management address and interface (design §5.3). */
import { assertEquals } from "../tests/assert.ts";
import { chooseMgmt, defaultRouteInterface, type InterfaceAddress } from "./mgmt_addr.ts";

const ROUTE = `Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
bond0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0
`;

const ADDRS: InterfaceAddress[] = [
  { name: "lo", family: "IPv4", address: "127.0.0.1" },
  { name: "docker0", family: "IPv4", address: "172.17.0.1" },
  { name: "bond0", family: "IPv6", address: "fe80::1" },
  { name: "bond0", family: "IPv4", address: "10.0.0.7" },
  { name: "ib0", family: "IPv6", address: "2001:db8::7" },
];

Deno.test("mgmt: the default route's interface, unless the operator chose", () => {
  assertEquals(defaultRouteInterface(ROUTE), "bond0");
  assertEquals(defaultRouteInterface("Iface\tDestination\n"), null);
  assertEquals(chooseMgmt(ADDRS, {}, "bond0"), { addr: "10.0.0.7", iface: "bond0" });
  assertEquals(chooseMgmt(ADDRS, { iface: "ib0" }, "bond0"), { addr: "2001:db8::7", iface: "ib0" });
  assertEquals(chooseMgmt(ADDRS, { addr: "172.17.0.1" }, "bond0"), {
    addr: "172.17.0.1",
    iface: "docker0",
  });
  assertEquals(chooseMgmt(ADDRS, { addr: "10.9.9.9", iface: "eth9" }, null), {
    addr: "10.9.9.9",
    iface: "eth9",
  });
  // No default route: the first physical-looking interface, never docker0 or lo.
  assertEquals(chooseMgmt(ADDRS, {}, null), { addr: "10.0.0.7", iface: "bond0" });
  assertEquals("error" in chooseMgmt(ADDRS, { iface: "eth9" }, null), true);
  assertEquals("error" in chooseMgmt(ADDRS.slice(0, 2), {}, null), true);
});
