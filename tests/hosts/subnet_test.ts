import fc from "fast-check";
import { assertEquals, assertOk, assertThrows } from "../assert.ts";
import {
  type Cidr,
  formatCidr,
  formatIpv4,
  hostAddress,
  overlaps,
  parseCidr,
  parseIpv4,
  pickSubnet,
  routeDestinations,
  SubnetError,
} from "./subnet.ts";

const ipv4 = fc.integer({ min: 0, max: 2 ** 32 - 1 });
const cidr = fc.tuple(ipv4, fc.integer({ min: 0, max: 32 })).map(([n, bits]) =>
  parseCidr(`${formatIpv4(n)}/${bits}`)
);

Deno.test("parseIpv4 and formatIpv4 round-trip", () => {
  fc.assert(fc.property(ipv4, (n) => assertEquals(parseIpv4(formatIpv4(n)), n)));
});

Deno.test("parseCidr clears host bits; a bare address is a /32", () => {
  assertEquals(formatCidr(parseCidr("10.1.2.3/24")), "10.1.2.0/24");
  assertEquals(formatCidr(parseCidr("10.1.2.3")), "10.1.2.3/32");
  assertEquals(formatCidr(parseCidr("255.255.255.255/1")), "128.0.0.0/1");
  assertEquals(formatCidr(parseCidr("1.2.3.4/0")), "0.0.0.0/0");
});

Deno.test("parseCidr and parseIpv4 refuse bad text, quoting it", () => {
  for (const bad of ["", "10.1.2", "10.1.2.256", "10.1.2.3.4", "a.b.c.d", "10.1.2.3/"]) {
    assertThrows(() => parseCidr(bad), SubnetError, JSON.stringify(bad.split("/")[0]).slice(1, -1));
  }
  assertThrows(() => parseCidr("10.0.0.0/33"), SubnetError, "prefix over 32");
  assertThrows(() => parseCidr("10.0.0.0/8/8"), SubnetError, "Cannot parse IPv4 network");
});

Deno.test("overlaps: a table", () => {
  const o = (a: string, b: string) => overlaps(parseCidr(a), parseCidr(b));
  assertOk(o("10.0.0.0/8", "10.20.30.0/24"));
  assertOk(o("10.20.30.0/24", "10.0.0.0/8"));
  assertOk(o("10.20.30.7", "10.20.30.0/24"));
  assertOk(!o("10.20.31.0/24", "10.20.30.0/24"));
  assertOk(!o("192.0.2.0/24", "10.20.30.0/24"));
  assertOk(o("0.0.0.0/0", "192.0.2.1"));
});

Deno.test("overlaps is symmetric, and true exactly when one network holds the other's first address", () => {
  const holds = (net: Cidr, addr: number) =>
    parseCidr(`${formatIpv4(addr)}/${net.bits}`).base === net.base;
  fc.assert(fc.property(cidr, cidr, (a, b) => {
    assertEquals(overlaps(a, b), overlaps(b, a));
    assertEquals(overlaps(a, b), holds(a, b.base) || holds(b, a.base));
  }));
});

Deno.test("routeDestinations reads ip -j route's dst fields, skipping default routes", () => {
  const json = JSON.stringify([
    { dst: "default", gateway: "192.0.2.1", dev: "eth0" },
    { dst: "192.0.2.0/24", dev: "eth0" },
    { type: "local", dst: "127.0.0.1", dev: "lo", table: "local" },
  ]);
  assertEquals(routeDestinations(json).map(formatCidr), ["192.0.2.0/24", "127.0.0.1/32"]);
  assertEquals(routeDestinations(""), []);
  assertEquals(routeDestinations("[]\n"), []);
  assertThrows(() => routeDestinations("{"), SubnetError, "Cannot parse the output of ip -j route");
  assertThrows(() => routeDestinations("{}"), SubnetError, "not a JSON array");
  assertThrows(() => routeDestinations('[{"dev":"lo"}]'), SubnetError, "route #0 has no dst");
});

Deno.test("pickSubnet gives a 10.x.y.0/24 that overlaps nothing taken", () => {
  fc.assert(
    fc.property(
      fc.array(cidr.filter((c) => c.bits >= 9), { maxLength: 20 }),
      fc.integer(),
      (taken, seed) => {
        let s = seed >>> 0;
        const random = () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
        const picked = pickSubnet(taken, random, 1000);
        assertEquals(picked.bits, 24);
        assertOk(overlaps(picked, parseCidr("10.0.0.0/8")), formatCidr(picked));
        assertOk(taken.every((t) => !overlaps(t, picked)), formatCidr(picked));
      },
    ),
  );
});

Deno.test("pickSubnet gives up after its attempts, listing what was taken", () => {
  assertThrows(
    () => pickSubnet([parseCidr("10.0.0.0/8")], Math.random, 5),
    SubnetError,
    "5 random 10.x.y.0/24 all overlap this machine's routes (10.0.0.0/8)",
  );
});

Deno.test("hostAddress numbers hosts 1…254 of a /24", () => {
  const net = parseCidr("10.9.8.0/24");
  assertEquals(hostAddress(net, 1), "10.9.8.1");
  assertEquals(hostAddress(net, 254), "10.9.8.254");
  assertThrows(() => hostAddress(net, 0), SubnetError, "a /24 holds hosts 1…254");
  assertThrows(() => hostAddress(net, 255), SubnetError, "host #255");
  assertThrows(() => hostAddress(parseCidr("10.9.0.0/16"), 1), SubnetError, "not a /24");
});
