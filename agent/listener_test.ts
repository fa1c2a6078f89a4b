import { assertEquals, assertOk } from "../tests/assert.ts";
import { BindError } from "../http/bind_error.ts";
import { listenerUrl, serveListener } from "./listener.ts";

Deno.test("listenerUrl: a wildcard bind is reached on the management address", () => {
  assertEquals(listenerUrl("0.0.0.0", 9181, "10.0.0.5"), "http://10.0.0.5:9181");
  assertEquals(listenerUrl("::", 9181, "fd00::5"), "http://[fd00::5]:9181");
  assertEquals(listenerUrl("127.0.0.1", 9180, "10.0.0.5"), "http://127.0.0.1:9180");
  assertEquals(listenerUrl("[::1]", 9180, "10.0.0.5"), "http://[::1]:9180");
});

Deno.test("serveListener: a taken port is a BindError naming the address", async () => {
  const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (held.addr as Deno.NetAddr).port;
  try {
    let e: unknown = null;
    try {
      const s = serveListener(
        "the engine proxy",
        { hostname: "127.0.0.1", port },
        () => new Response(),
        () => {},
      );
      await s.shutdown();
    } catch (x) {
      e = x;
    }
    assertOk(e instanceof BindError, String(e));
    assertOk(e.message.includes(`127.0.0.1:${port}`) && e.message.includes("engine proxy"));
  } finally {
    held.close();
  }
});
