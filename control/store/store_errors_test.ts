import { assertEquals, assertOk } from "../../tests/assert.ts";
import { StoreError } from "./store.ts";
import { describeStoreError, openFailure, storeFailure } from "./store_errors.ts";

/** An error as a driver throws it: a message and the driver's code. */
function driverError(message: string, fields: Record<string, unknown>): Error {
  return Object.assign(new Error(message), fields);
}

Deno.test("each driver's errors in words an operator can act on", () => {
  const cases: [unknown, string][] = [
    // node:sqlite: extended result codes carry the primary one in the low byte.
    [driverError("file is not a database", { errcode: 26 }), "file is not a database (damaged?)"],
    [
      driverError("database disk image is malformed", { errcode: 11 | (1 << 8) }),
      "the database is damaged (database disk image is malformed)",
    ],
    [driverError("database is locked", { errcode: 5 }), "database is locked"],
    // pg and sockets.
    [
      driverError("connect ECONNREFUSED 127.0.0.1:5432", { code: "ECONNREFUSED" }),
      "connection refused (is PostgreSQL running and listening there?)",
    ],
    [
      driverError('password authentication failed for user "u"', { code: "28P01" }),
      'authentication failed (password authentication failed for user "u")',
    ],
    [
      driverError('database "x" does not exist', { code: "3D000" }),
      'the database does not exist (database "x" does not exist)',
    ],
    ["a thrown string", "a thrown string"],
  ];
  for (const [e, words] of cases) assertEquals(describeStoreError(e), words);
});

Deno.test("failures name the store and keep the driver's error as the cause", () => {
  const cause = driverError("disk I/O error", { errcode: 10 });
  const e = storeFailure("/var/lib/llmgw/llmgw.db", "put node", cause);
  assertEquals(e.message, "Store /var/lib/llmgw/llmgw.db: put node failed: disk I/O error");
  assertOk(e.cause === cause);
  const o = openFailure("postgres://u:***@db/llmgw", driverError("x", { code: "3D000" }));
  assertEquals(
    o.message,
    "Cannot open store postgres://u:***@db/llmgw: the database does not exist (x)",
  );
  // A StoreError already says it all.
  const own = new StoreError("Store s is closed");
  assertOk(storeFailure("s", "list nodes", own) === own && openFailure("s", own) === own);
});
