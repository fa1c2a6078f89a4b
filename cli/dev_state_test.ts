import { join } from "node:path";
import { assertEquals, assertOk, assertThrows } from "../tests/assert.ts";
import {
  chooseDevPort,
  DevPortError,
  devStatePaths,
  loadOrCreateDevAdminToken,
  prepareDevState,
  readDevPort,
  writeDevEnv,
  writeDevPort,
} from "./dev_state.ts";
import { SqliteStore } from "../control/store/sqlite_store.ts";

function mode(path: string): string {
  return (Deno.statSync(path).mode! & 0o777).toString(8);
}

Deno.test("dev state: the store and its WAL files are 0600 and the control directory 0700, new or left 0644", () => {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-dev-state-" });
  try {
    const paths = devStatePaths(dir);
    prepareDevState(paths);
    assertEquals(mode(paths.control), "700");
    assertEquals(mode(paths.store), "600");
    const store = SqliteStore.open(paths.store);
    try {
      // SQLite gives its -wal and -shm files the database file's mode.
      for (const f of [paths.store, `${paths.store}-wal`, `${paths.store}-shm`]) {
        assertEquals(mode(f), "600", f);
      }
    } finally {
      store.close();
    }
    // A directory an older dev left readable by others is narrowed.
    Deno.chmodSync(paths.control, 0o755);
    Deno.chmodSync(paths.store, 0o644);
    prepareDevState(paths);
    assertEquals([mode(paths.control), mode(paths.store)], ["700", "600"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("dev state: the admin token is made once, 0600, and kept by later starts", () => {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-dev-token-" });
  try {
    const paths = devStatePaths(dir);
    prepareDevState(paths);
    const first = loadOrCreateDevAdminToken(paths);
    assertOk(!first.kept && first.token.startsWith("llmgw_admin_"), first.token);
    assertEquals(mode(paths.adminToken), "600");
    assertEquals(loadOrCreateDevAdminToken(paths), { token: first.token, kept: true });
    // A file that holds no admin token is replaced, not trusted.
    Deno.writeTextFileSync(paths.adminToken, "not a token of ours\n");
    const next = loadOrCreateDevAdminToken(paths);
    assertOk(!next.kept && next.token !== first.token);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("dev state: dev.env is 0600 and holds the four variables", () => {
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-dev-env-" });
  try {
    const paths = devStatePaths(dir);
    writeDevEnv(paths, {
      url: "https://127.0.0.1:7070",
      token: "llmgw_admin_x",
      gatewayUrl: "https://127.0.0.1:7080",
      caPath: join(dir, "control/tls/ca.crt"),
    });
    assertEquals(mode(paths.env), "600");
    assertEquals(
      Deno.readTextFileSync(paths.env),
      `LLMGW_URL=https://127.0.0.1:7070\nLLMGW_TOKEN=llmgw_admin_x\n` +
        `LLMGW_GATEWAY_URL=https://127.0.0.1:7080\nLLMGW_CA=${join(dir, "control/tls/ca.crt")}\n`,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("dev state: a directory keeps the --port it was made with; another one is refused", () => {
  assertEquals(chooseDevPort(null, null, 7070), 7070);
  assertEquals(chooseDevPort(9070, null, 7070), 9070);
  assertEquals(chooseDevPort(null, 9070, 7070), 9070);
  assertEquals(chooseDevPort(9070, 9070, 7070), 9070);
  const e = assertThrows(() => chooseDevPort(8070, 9070, 7070), DevPortError);
  assertEquals(
    e.message,
    "this directory's cluster runs on --port 9070, not 8070: its nodes are registered with the " +
      "control plane at https://127.0.0.1:9070; start it with --port 9070 (or without --port), " +
      "or give --port 8070 another --dir",
  );
  const dir = Deno.makeTempDirSync({ prefix: "llmgw-dev-port-" });
  try {
    const paths = devStatePaths(dir);
    assertEquals(readDevPort(paths), null);
    writeDevPort(paths, 9070);
    assertEquals(readDevPort(paths), 9070);
    assertEquals(readDevPort(paths, 1024, 9000), null, "out of range: not a port of ours");
    Deno.writeTextFileSync(paths.port, "seven\n");
    assertEquals(readDevPort(paths), null);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
