import fc from "fast-check";
import { assertEquals, assertOk, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { ProcNetError } from "../supervisor/listen_owner.ts";
import {
  assertBindable,
  BindError,
  bindErrorFrom,
  type BindFailure,
  formatBindError,
  hostPort,
} from "./bind_error.ts";

const base = { what: "the control API", address: "127.0.0.1", port: 7070 };

Deno.test("formatBindError: one line naming the address, the port and the holder", () => {
  const cases: [BindFailure, string][] = [
    [
      {
        ...base,
        reason: "address already in use",
        holder: { kind: "found", holders: [{ pid: 4242, cmdline: ["vllm", "serve", "m"] }] },
      },
      "Cannot listen on 127.0.0.1:7070 for the control API: address already in use " +
      "by pid 4242 (vllm serve m)",
    ],
    [
      {
        ...base,
        reason: "address already in use",
        holder: { kind: "found", holders: [{ pid: null, cmdline: [] }] },
      },
      "Cannot listen on 127.0.0.1:7070 for the control API: address already in use " +
      "by a process /proc does not show (another user's?)",
    ],
    [
      { ...base, reason: "address already in use", holder: { kind: "found", holders: [] } },
      "Cannot listen on 127.0.0.1:7070 for the control API: address already in use; " +
      "/proc shows no process listening on port 7070 (a socket bound without listening, " +
      "or one that just closed)",
    ],
    [
      {
        ...base,
        reason: "address already in use",
        holder: { kind: "unknown", reason: "Cannot read /proc/net/tcp: denied" },
      },
      "Cannot listen on 127.0.0.1:7070 for the control API: address already in use; " +
      "the holder is unknown (Cannot read /proc/net/tcp: denied)",
    ],
    [
      {
        what: "the gateway",
        address: "::1",
        port: 7080,
        reason: "address not available on this host",
        holder: { kind: "not_looked" },
      },
      "Cannot listen on [::1]:7080 for the gateway: address not available on this host",
    ],
  ];
  for (const [failure, want] of cases) assertEquals(formatBindError(failure), want);
});

Deno.test("formatBindError: always one line with the address and port (property)", () => {
  const holder = fc.oneof(
    fc.record({
      kind: fc.constant("found" as const),
      holders: fc.array(
        fc.record({
          pid: fc.option(fc.integer({ min: 1, max: 4_194_304 })),
          cmdline: fc.array(fc.string()),
        }),
      ),
    }),
    fc.record({ kind: fc.constant("unknown" as const), reason: fc.string() }),
    fc.constant({ kind: "not_looked" as const }),
  );
  fc.assert(fc.property(
    fc.string(),
    fc.oneof(fc.ipV4(), fc.ipV6(), fc.domain()),
    fc.integer({ min: 0, max: 65535 }),
    fc.string(),
    holder,
    (what, address, port, reason, h) => {
      const line = formatBindError({ what, address, port, reason, holder: h });
      assertOk(!/[\r\n]/.test(line), `one line: ${JSON.stringify(line)}`);
      assertOk(line.startsWith(`Cannot listen on ${hostPort(address, port)} for `), line);
      if (h.kind === "found") {
        for (const x of h.holders) if (x.pid !== null) assertStringIncludes(line, `pid ${x.pid}`);
      }
    },
  ));
});

Deno.test("bindErrorFrom: looks the holder up only for an address in use", () => {
  const calls: number[] = [];
  const lookup = (port: number) => {
    calls.push(port);
    return [{ pid: 7, cmdline: ["nginx"] }];
  };
  const inUse = bindErrorFrom(
    new Deno.errors.AddrInUse("Address already in use (os error 98)"),
    "the gateway",
    "0.0.0.0",
    7080,
    lookup,
  );
  assertEquals(calls, [7080]);
  assertEquals(inUse.holder, { kind: "found", holders: [{ pid: 7, cmdline: ["nginx"] }] });
  assertEquals([inUse.address, inUse.port], ["0.0.0.0", 7080]);
  assertEquals(
    inUse.message,
    "Cannot listen on 0.0.0.0:7080 for the gateway: address already in use by pid 7 (nginx)",
  );
  const cases: [Error, number, string][] = [
    [new Deno.errors.AddrNotAvailable("os error 99"), 7080, "address not available on this host"],
    [new Deno.errors.PermissionDenied("os error 13"), 80, "permission denied (ports below 1024"],
    [new Deno.errors.PermissionDenied("os error 13"), 7080, "permission denied"],
    [new Error("failed to lookup address\ninformation"), 7080, "failed to lookup address info"],
  ];
  for (const [e, port, reason] of cases) {
    const b = bindErrorFrom(e, "the gateway", "10.1.2.3", port, lookup);
    assertStringIncludes(b.message, `10.1.2.3:${port} for the gateway: ${reason}`);
    assertEquals(b.holder, { kind: "not_looked" });
    assertEquals(b.cause, e);
  }
  assertEquals(calls, [7080], "no lookup but for an address in use");
});

Deno.test("bindErrorFrom: a lookup that fails makes the holder unknown", () => {
  const b = bindErrorFrom(new Deno.errors.AddrInUse("in use"), "x", "127.0.0.1", 9, () => {
    throw new ProcNetError("Cannot read /proc/net/tcp: gone");
  });
  assertEquals(b.holder, { kind: "unknown", reason: "Cannot read /proc/net/tcp: gone" });
});

Deno.test({
  name: "assertBindable: a port this process holds names this process from /proc",
  ignore: Deno.build.os !== "linux",
  fn() {
    const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    try {
      const port = held.addr.port;
      const e = assertThrows(
        () => assertBindable("the agent's local API", "127.0.0.1", port),
        BindError,
        `Cannot listen on 127.0.0.1:${port} for the agent's local API: address already in use by pid ${Deno.pid} (`,
      ) as BindError;
      assertEquals(e.holder.kind, "found");
    } finally {
      held.close();
    }
  },
});

Deno.test("assertBindable: a free port is left free", () => {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = probe.addr.port;
  probe.close();
  assertBindable("x", "127.0.0.1", port);
  // Closed again: listening on it once more works.
  Deno.listen({ hostname: "127.0.0.1", port }).close();
});
