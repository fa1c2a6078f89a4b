/**
 * A throwaway PostgreSQL cluster for tests (issue #15): `initdb` into a
 * temporary directory, `pg_ctl` to start it on a loopback port and a unix
 * socket in that directory, trust authentication for loopback only, and
 * removal of everything afterwards. The server's pid comes from
 * `postmaster.pid`, so {@link PostgresServer.stop} can kill it by pid when
 * `pg_ctl stop` does not finish, even after a failed test.
 *
 * PostgreSQL refuses to run as root; as root the commands run as the
 * `postgres` user (Debian's packages create it) through `runuser`.
 *
 * @module
 */
import { join } from "node:path";

/** Why no server can be started here, for a test's ignore message. */
export type PostgresAvailability = { ok: true; bin: string } | { ok: false; reason: string };

/** How long pg_ctl may take to start or stop the server (ms). */
const PG_CTL_TIMEOUT_S = 30;

/**
 * The directory holding `initdb`, `pg_ctl` and `postgres`, or why there is
 * none. With `LLMGW_REQUIRE_POSTGRES=1` (set by `.ci/run`) a missing server
 * throws instead, so CI cannot pass by skipping the PostgreSQL tests.
 */
export function postgresAvailable(): PostgresAvailability {
  const found = findPostgres();
  if (!found.ok && Deno.env.get("LLMGW_REQUIRE_POSTGRES") === "1") {
    throw new Error(`LLMGW_REQUIRE_POSTGRES=1 but ${found.reason}`);
  }
  return found;
}

function findPostgres(): PostgresAvailability {
  const candidates: string[] = [];
  const fromEnv = Deno.env.get("LLMGW_PG_BIN");
  if (fromEnv) candidates.push(fromEnv);
  try {
    // Debian: /usr/lib/postgresql/<major>/bin; the newest first.
    const majors = [...Deno.readDirSync("/usr/lib/postgresql")].map((e) => e.name)
      .filter((n) => /^\d+$/.test(n)).sort((a, b) => Number(b) - Number(a));
    for (const m of majors) candidates.push(`/usr/lib/postgresql/${m}/bin`);
  } catch {
    // not a Debian layout
  }
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) if (dir) candidates.push(dir);
  for (const dir of candidates) {
    try {
      Deno.statSync(join(dir, "initdb"));
      Deno.statSync(join(dir, "pg_ctl"));
      if (Deno.uid() === 0) {
        try {
          Deno.statSync("/usr/sbin/runuser");
        } catch {
          return { ok: false, reason: "running as root without runuser to drop to postgres" };
        }
      }
      return { ok: true, bin: dir };
    } catch {
      // not here
    }
  }
  return {
    ok: false,
    reason: "PostgreSQL's initdb/pg_ctl are not installed (apt-get install postgresql)",
  };
}

/** A running throwaway server. */
export interface PostgresServer {
  /** A URL for the `postgres` superuser's database `db` (created by {@link createDatabase}). */
  url(db?: string): string;
  /** The loopback TCP port. */
  readonly port: number;
  /** The postmaster's pid (changes on restart). */
  readonly pid: number;
  /** Creates an empty database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Runs SQL as the superuser through `psql` (for checks on rows); returns stdout, unaligned. */
  psql(db: string, sql: string): Promise<string>;
  /** Stops the server (fast shutdown: sessions are ended). */
  stopServer(): Promise<void>;
  /** Starts it again on the same port and data directory. */
  startServer(): Promise<void>;
  /** Stops the server and removes its directory; safe to call twice. */
  stop(): Promise<void>;
}

/** A free loopback TCP port (bound, read and released). */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Runs a PostgreSQL binary (as postgres when root); throws with its stderr on failure. */
async function run(bin: string, tool: string, args: string[], what: string): Promise<string> {
  const path = join(bin, tool);
  const [cmd, argv] = Deno.uid() === 0
    ? ["/usr/sbin/runuser", ["-u", "postgres", "--", path, ...args]]
    : [path, args];
  const out = await new Deno.Command(cmd, {
    args: argv,
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
    env: { LC_ALL: "C", PGTZ: "UTC" },
  }).output();
  const text = new TextDecoder();
  if (!out.success) {
    throw new Error(`${what} failed (${tool} exit ${out.code}): ${text.decode(out.stderr).trim()}`);
  }
  return text.decode(out.stdout);
}

/** The postmaster's pid from its pid file, or null when none is running there. */
function postmasterPid(dataDir: string): number | null {
  try {
    const pid = Number(Deno.readTextFileSync(join(dataDir, "postmaster.pid")).split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Whether a process with `pid` exists. */
function alive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch {
    return false;
  }
}

/**
 * Creates and starts a throwaway cluster. Call {@link PostgresServer.stop}
 * in a `finally`: it stops the server by pid and removes the directory.
 *
 * @throws {Error} When PostgreSQL is unavailable or does not start (nothing is left running).
 */
export async function startPostgres(
  options: { tls?: { certPem: string; keyPem: string } } = {},
): Promise<PostgresServer> {
  const tls = options.tls;
  const available = postgresAvailable();
  if (!available.ok) throw new Error(`Cannot start PostgreSQL: ${available.reason}`);
  const bin = available.bin;
  const root = await Deno.makeTempDir({ prefix: "llmgw-pg-" });
  const dataDir = join(root, "data");
  const socketDir = join(root, "sock");
  await Deno.mkdir(socketDir);
  if (Deno.uid() === 0) {
    const { uid, gid } = pgUser();
    await Deno.chown(root, uid, gid);
    await Deno.chown(socketDir, uid, gid);
  }
  let port = freePort();
  let stopped = false;
  const cleanup = async () => {
    const pid = postmasterPid(dataDir);
    if (pid !== null && alive(pid)) {
      await run(bin, "pg_ctl", ["-D", dataDir, "-m", "immediate", "-w", "-t", "10", "stop"], "stop")
        .catch(() => {});
      if (alive(pid)) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch {
          // gone meanwhile
        }
      }
    }
    await Deno.remove(root, { recursive: true }).catch(() => {});
  };
  const start = async () => {
    const serverOptions = [
      `-p ${port}`,
      "-h 127.0.0.1",
      `-k ${socketDir}`,
      "-c fsync=off",
      "-c synchronous_commit=off",
      "-c full_page_writes=off",
      "-c max_connections=200",
      ...(tls === undefined ? [] : [
        "-c ssl=on",
        `-c ssl_cert_file=${join(root, "server.crt")}`,
        `-c ssl_key_file=${join(root, "server.key")}`,
      ]),
    ].join(" ");
    await run(
      bin,
      "pg_ctl",
      [
        "-D",
        dataDir,
        "-o",
        serverOptions,
        "-l",
        join(root, "server.log"),
        "-w",
        "-t",
        String(PG_CTL_TIMEOUT_S),
        "start",
      ],
      "starting PostgreSQL",
    );
  };
  try {
    await run(
      bin,
      "initdb",
      ["-D", dataDir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"],
      "initdb",
    );
    if (options.tls !== undefined) {
      // PostgreSQL refuses a key file others can read.
      await Deno.writeTextFile(join(root, "server.crt"), options.tls.certPem);
      await Deno.writeTextFile(join(root, "server.key"), options.tls.keyPem, { mode: 0o600 });
      if (Deno.uid() === 0) {
        const { uid, gid } = pgUser();
        await Deno.chown(join(root, "server.crt"), uid, gid);
        await Deno.chown(join(root, "server.key"), uid, gid);
      }
    }
    // Loopback and the socket only: trust is for this throwaway cluster alone.
    await Deno.writeTextFile(
      join(dataDir, "pg_hba.conf"),
      "local all all trust\nhost all all 127.0.0.1/32 trust\n",
    );
    try {
      await start();
    } catch {
      // The port may have been taken between freePort and the bind: one more try.
      port = freePort();
      await start();
    }
  } catch (e) {
    await cleanup();
    throw e;
  }
  const psql = (db: string, sql: string) =>
    run(bin, "psql", [
      "-h",
      socketDir,
      "-p",
      String(port),
      "-U",
      "postgres",
      "-d",
      db,
      "-XAtq",
      "-v",
      "ON_ERROR_STOP=1",
      "-c",
      sql,
    ], "psql");
  return {
    url: (db = "postgres") => `postgres://postgres@127.0.0.1:${port}/${db}`,
    get port() {
      return port;
    },
    get pid() {
      return postmasterPid(dataDir) ?? 0;
    },
    async createDatabase(name: string) {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
      await psql("postgres", `CREATE DATABASE ${name}`);
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    psql,
    async stopServer() {
      await run(
        bin,
        "pg_ctl",
        ["-D", dataDir, "-m", "fast", "-w", "-t", "30", "stop"],
        "stopping PostgreSQL",
      );
    },
    startServer: start,
    async stop() {
      if (stopped) return;
      stopped = true;
      await cleanup();
    },
  };
}

/** The postgres user's uid and gid, from /etc/passwd. */
function pgUser(): { uid: number; gid: number } {
  const line = Deno.readTextFileSync("/etc/passwd").split("\n").find((l) =>
    l.startsWith("postgres:")
  );
  if (line === undefined) throw new Error("Cannot start PostgreSQL as root: no postgres user");
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}
