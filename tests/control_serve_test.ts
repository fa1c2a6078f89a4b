/**
 * `llmgw control serve` as a process: it refuses a damaged store or one from
 * a newer schema with a clear message instead of running on partial state,
 * and it never prints the tokens it was given.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DatabaseSync } from "node:sqlite";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "./assert.ts";
import { START_TIMEOUT_MS, until } from "./until.ts";
import { catchesSignal } from "./proc_probe.ts";
import { CertificateAuthority, publicKeyHash } from "../tls/authority.ts";
import { pinnedFetch } from "../tls/trust.ts";

const MAIN = fileURLToPath(new URL("../main.ts", import.meta.url));

/** `llmgw control serve` on `storeDir`, any free port, no gateway. */
function spawnServe(
  storeDir: string,
  extra: string[],
  env: Record<string, string>,
  stderr: "piped" | "null" = "piped",
): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      MAIN,
      "control",
      "serve",
      "--listen",
      "127.0.0.1:0",
      "--store",
      storeDir,
      "--gateway-listen",
      "off",
      ...extra,
    ],
    env,
    stdout: "piped",
    stderr,
  }).spawn();
}

/**
 * Runs `llmgw control serve` on `storeDir` to its end; with `stopWhenListening`,
 * stops it with SIGTERM once it says it listens. Its code and output.
 */
async function serve(
  storeDir: string,
  stopWhenListening = false,
  extra: string[] = ["--insecure-http"],
): Promise<{ code: number; out: string }> {
  const child = spawnServe(storeDir, extra, {
    LLMGW_ADMIN_TOKEN: "admin-secret-token-123",
    LLMGW_JOIN_TOKEN: "join-secret-token-456",
  });
  const stderr = new Response(child.stderr).text();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  const readAll = async () => {
    for (let r = await reader.read(); !r.done; r = await reader.read()) out += r.value;
  };
  try {
    if (stopWhenListening) {
      await until("control serve listening", async () => {
        const { value, done } = await reader.read();
        if (done) throw new Error(`control serve ended: ${out}${await stderr}`);
        out += value;
        return out.includes("listening on");
      }, { timeoutMs: START_TIMEOUT_MS });
      // It says it listens a moment before its SIGTERM handler is in place.
      await until("control serve handling SIGTERM", () => catchesSignal(child.pid, 15));
      child.kill("SIGTERM");
    }
    await readAll();
  } catch (e) {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
    await child.status;
    throw e;
  }
  const { code } = await child.status;
  return { code, out: out + await stderr };
}

Deno.test("control serve refuses a damaged store and a newer schema, naming the file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeFile(join(dir, "llmgw.db"), crypto.getRandomValues(new Uint8Array(8192)));
    const damaged = await serve(dir);
    assertEquals(damaged.code, 1);
    assertStringIncludes(damaged.out, `Cannot open store ${join(dir, "llmgw.db")}`);
    assertOk(!damaged.out.includes("    at "), "no stack trace");
    await Deno.remove(join(dir, "llmgw.db"));
    const db = new DatabaseSync(join(dir, "llmgw.db"));
    db.exec("PRAGMA user_version = 99");
    db.close();
    const newer = await serve(dir);
    assertEquals(newer.code, 1);
    assertStringIncludes(newer.out, "its schema version 99 is newer than this llmgw");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("control serve starts on a fresh store and never prints the tokens it was given", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = await serve(dir, true);
    assertEquals(r.code, 0, `its output:\n${r.out}`);
    assertStringIncludes(r.out, "llmgw control plane listening on http://127.0.0.1:");
    assertStringIncludes(r.out, "WARNING: --insecure-http", "plain HTTP is said at every start");
    assertOk(!r.out.includes("admin-secret-token-123") && !r.out.includes("join-secret-token-456"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("control serve: TLS by default, the CA pinned by its key hash, the first admin token in a 0600 file", async () => {
  const dir = await Deno.makeTempDir();
  const child = spawnServe(dir, [], { LLMGW_ADMIN_TOKEN: "", LLMGW_JOIN_TOKEN: "" }, "null");
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  try {
    await until("the URL and the token path", async () => {
      const { value, done } = await reader.read();
      if (done) throw new Error(`control serve ended: ${out}`);
      out += value;
      return /listening on https:\/\/\S+/.test(out) && out.includes("admin.token");
    }, { timeoutMs: START_TIMEOUT_MS });
    const url = /listening on (https:\/\/\S+)/.exec(out)![1];
    const tokenPath = join(dir, "admin.token");
    assertStringIncludes(out, `first admin token written to ${tokenPath}`);
    assertEquals(Deno.statSync(tokenPath).mode! & 0o777, 0o600);
    const admin = Deno.readTextFileSync(tokenPath).trim();
    assertOk(!out.includes(admin), "the token itself is never printed");
    assertEquals(Deno.statSync(join(dir, "tls", "ca.key")).mode! & 0o777, 0o600);
    const ca = Deno.readTextFileSync(join(dir, "tls", "ca.crt"));
    assertStringIncludes(out, `sha256:${await publicKeyHash(ca)}`);

    // Trusting the cluster CA: through. Plain HTTP, or trusting another CA: refused.
    const pinned = pinnedFetch(ca);
    try {
      const res = await pinned.fetch(`${url}/v1/tokens`, {
        headers: { authorization: `Bearer ${admin}` },
      });
      assertEquals(res.status, 200);
      assertEquals((await res.json()).tokens.map((t: { kind: string }) => t.kind), ["admin"]);
    } finally {
      pinned.close();
    }
    await assertRejects(() => fetch(url.replace("https:", "http:") + "/healthz"), TypeError);
    const { ca: other } = await CertificateAuthority.create({
      now: Date.now(),
      lifetimeMs: 86_400_000,
    });
    const stranger = pinnedFetch(other.certPem);
    try {
      await assertRejects(() => stranger.fetch(`${url}/healthz`), TypeError);
    } finally {
      stranger.close();
    }
  } finally {
    child.kill("SIGTERM");
    await child.status;
    await reader.cancel().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
