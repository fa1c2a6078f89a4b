import { assertOk } from "../tests/assert.ts";
import { isLoopback } from "./loopback.ts";

Deno.test("isLoopback knows loopback names and addresses, IPv4-mapped and bracketed ones too", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"]) {
    assertOk(isLoopback(h), h);
  }
  for (const h of ["0.0.0.0", "10.0.0.1", "::", "gw.example", "::ffff:10.0.0.1", "128.0.0.1"]) {
    assertOk(!isLoopback(h), h);
  }
});
