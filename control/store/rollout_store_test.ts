import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { assertEquals } from "../../tests/assert.ts";
import { MIGRATIONS } from "./sqlite_migrations.ts";
import { SqliteStore } from "./sqlite_store.ts";
import { deploymentSpec, placed } from "../../tests/store_records.ts";

Deno.test("a SQLite file from before revisions opens with its records at revision 1", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_rollout_store_" });
  try {
    const path = join(dir, "llmgw.db");
    // The file as llmgw wrote it at schema version 4, one record of each kind involved.
    const db = new DatabaseSync(path);
    try {
      for (const m of MIGRATIONS.slice(0, 4)) db.exec(m);
      db.exec("PRAGMA user_version = 4");
      db.prepare(
        "INSERT INTO deployments (name, spec, created_at, updated_at) VALUES (?, ?, 1, 2)",
      ).run("llama", JSON.stringify(deploymentSpec("llama")));
      db.prepare(
        `INSERT INTO replicas (id, deployment, replica_index, phase, placement, explanation,
           failure, created_at, updated_at) VALUES (?, ?, 0, 'placed', ?, NULL, NULL, 1, 2)`,
      ).run("llama-r0", "llama", JSON.stringify(placed("llama-r0", "llama")));
    } finally {
      db.close();
    }
    const store = SqliteStore.open(path);
    try {
      const [d] = await store.listDeployments();
      assertEquals([d.revision, d.history, d.rollout], [1, [], null]);
      assertEquals(d.spec, deploymentSpec("llama"));
      const [r] = await store.listReplicas();
      assertEquals([r.id, r.revision], ["llama-r0", 1]);
    } finally {
      store.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
