/**
 * The engine checks (design §9.3) open a fresh connection each time: the
 * engines' uvicorn closes a connection idle for 5 s (docs/engine_reference.md
 * §11), so a check sent on a pooled connection as the engine closes it would
 * fail a healthy engine.
 */
import { assertEquals } from "../tests/assert.ts";
import { runHttpCheck } from "./probes.ts";

Deno.test("an HTTP check asks on a connection of its own and lets it close", async () => {
  const asked: { connection: string | null; port: number }[] = [];
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req, info) => {
      asked.push({ connection: req.headers.get("connection"), port: info.remoteAddr.port });
      return new Response("ok");
    },
  );
  const check = { path: "/health", expect_status: 200 };
  for (let i = 0; i < 3; i++) {
    const result = await runHttpCheck("127.0.0.1", server.addr.port, check, 5_000, {
      authorization: "Bearer x",
    });
    assertEquals(result, { ok: true, answered: true, detail: "GET /health: 200" });
  }
  assertEquals(asked.map((a) => a.connection), ["close", "close", "close"]);
  assertEquals(new Set(asked.map((a) => a.port)).size, 3, "three checks, three connections");
});
