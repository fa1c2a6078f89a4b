/**
 * `llmgw dev`'s life as a process (issue #23 item 6): one dev per directory,
 * a closed terminal (SIGHUP) stopping it like Ctrl-C, the engines a `kill -9`
 * leaves behind adopted by the next dev on its directory and named by a dev
 * on another, the admin token kept across restarts, and fake engines run by
 * the Deno that runs dev whatever `deno` PATH finds.
 *
 * Every dev is stopped in a `finally` by pid, and every engine group it may
 * have left with it (tests/dev_processes.ts).
 */
import { join } from "node:path";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";
import { until } from "./until.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { groupMembers, isRunning } from "../supervisor/proc.ts";
import { devCommand } from "../cli/dev_command.ts";
import {
  devBases,
  devEnginePids,
  type DevEnv,
  devHubPid,
  type DevProcess,
  readDevEnv,
  spawnDev,
  stopDev,
} from "./dev_processes.ts";
import { portsOf } from "./port_plan.ts";

/** This file's ports (tests/port_plan.ts): room for its `llmgw dev` clusters. */
const PORTS = portsOf(import.meta.url);

interface ReplicaSeen {
  id: string;
  deployment: string;
  state: string;
}

/** The replicas' states the last {@link allReady} saw, for a timeout's message. */
let lastSeen = "";

/** The placeable sample replicas (llama-405b never fits), once all 4 are ready; else null. */
async function allReady(env: DevEnv, trust: typeof fetch): Promise<ReplicaSeen[] | null> {
  const r = await trust(`${env.url}/v1/replicas`, {
    headers: { authorization: `Bearer ${env.token}` },
  });
  if (!r.ok) throw new Error(`GET /v1/replicas: ${r.status} ${await r.text()}`);
  const { replicas } = await r.json() as { replicas: ReplicaSeen[] };
  const placeable = replicas.filter((x) => x.deployment !== "llama-405b");
  lastSeen = placeable.map((x) => `${x.id} ${x.state}`).join(", ");
  return placeable.length === 4 && placeable.every((x) => x.state === "ready") ? placeable : null;
}

/** Waits for a dev to exit and returns its code, within `timeoutMs`. */
async function exitCode(dev: DevProcess, timeoutMs: number, describe: () => string) {
  let code: number | null = null;
  dev.child.status.then((s) => code = s.code);
  return await until("llmgw dev to exit", () => code, { timeoutMs, intervalMs: 100, describe });
}

Deno.test({
  name:
    "llmgw dev: one dev per directory; SIGHUP stops it; engines a kill -9 leaves are adopted on its directory and named on another",
  async fn() {
    const [base, otherBase] = devBases(PORTS, 2);
    const dir = await Deno.makeTempDir({ prefix: "llmgw-dev-life-" });
    const otherDir = await Deno.makeTempDir({ prefix: "llmgw-dev-life-other-" });
    // A `deno` first on PATH that cannot run anything: the fake engines must
    // not depend on what PATH calls deno (a Node-only machine running npx).
    const bin = await Deno.makeTempDir({ prefix: "llmgw-dev-life-bin-" });
    Deno.writeTextFileSync(
      join(bin, "deno"),
      "#!/bin/sh\necho 'deno: not found (the test stand-in)' >&2\nexit 127\n",
      { mode: 0o755 },
    );
    const env = { PATH: `${bin}:${Deno.env.get("PATH") ?? ""}` };
    const devs: DevProcess[] = [];
    const pins: ReturnType<typeof pinnedFetch>[] = [];
    let engines: number[] = [];
    const describe = () =>
      devs.map((d) => `${d.dir} pid ${d.child.pid}: ${JSON.stringify(d.output())}`).join("\n") +
      `\nreplicas: ${lastSeen}`;
    try {
      // 1. A dev whose engines reach ready with a deno on PATH that fails.
      const first = spawnDev(base, dir, ["--load-seconds", "0.5"], env);
      devs.push(first);
      const denv = await until("dev.env written", () => readDevEnv(dir), {
        timeoutMs: 60_000,
        intervalMs: 200,
        describe,
      });
      const trust = pinnedFetch(Deno.readTextFileSync(denv.ca));
      pins.push(trust);
      await until("every placeable sample replica ready", () => allReady(denv, trust.fetch), {
        timeoutMs: 90_000,
        intervalMs: 250,
        describe,
      });
      engines = devEnginePids(dir).sort((a, b) => a - b);
      assertEquals(engines.length, 4, `engine pids: ${engines}`);
      // Without HF_ENDPOINT, dev runs the fake hub as its child, named in the banner.
      const hub = devHubPid(first.output().stdout);
      assertOk(hub !== null && isRunning(hub), `no fake hub running: ${first.output().stdout}`);
      const envText = Deno.readTextFileSync(join(dir, "dev.env"));

      // 2. A second dev on the same directory is refused before it writes or starts anything.
      const second = spawnDev(otherBase, dir, [], env);
      devs.push(second);
      assertEquals(await exitCode(second, 60_000, describe), 1, describe());
      assertStringIncludes(
        second.output().stderr,
        `llmgw: dev: already running on this directory: pid ${first.child.pid}, port ${base}`,
      );
      assertEquals(Deno.readTextFileSync(join(dir, "dev.env")), envText, "dev.env rewritten");
      assertEquals(devEnginePids(dir).sort((a, b) => a - b), engines, "engines restarted");

      // 3. kill -9 of dev: its engines keep running (detached, by design).
      first.child.kill("SIGKILL");
      await first.child.status;
      assertEquals(engines.filter((p) => !isRunning(p)), [], "engines outlive a killed dev");
      // …but its fake hub does not: it stops when dev's end of its stdin closes.
      await until("the fake hub gone with its killed dev", () => !isRunning(hub) || null, {
        timeoutMs: 10_000,
        intervalMs: 100,
        describe,
      });

      // 4. A dev on another directory over the same ports names them, and SIGHUP stops it.
      const other = spawnDev(base, otherDir, ["--no-samples"], env);
      devs.push(other);
      await until("the other dev's banner", () => /a local cluster/.test(other.output().stdout), {
        timeoutMs: 60_000,
        intervalMs: 200,
        describe,
      });
      const warned = other.output().stdout;
      assertStringIncludes(warned, "listener(s) it did not start in its engine ports");
      for (const pid of engines) {
        assertStringIncludes(warned, `pid ${pid} (`);
        assertStringIncludes(warned, ` -${pid}`);
      }
      const otherHub = devHubPid(other.output().stdout);
      assertOk(otherHub !== null && otherHub !== hub, `other hub: ${otherHub}`);
      other.child.kill("SIGHUP");
      assertEquals(await exitCode(other, 30_000, describe), 0, describe());
      assertOk(!isRunning(otherHub), "the fake hub outlived its dev's SIGHUP");
      assertStringIncludes(other.output().stdout, "llmgw dev: stopping");
      assertEquals(engines.filter((p) => !isRunning(p)), [], "another dev stopped no stranger");

      // 5. The same directory again: its agents adopt the engines; the admin token is kept.
      const again = spawnDev(base, dir, ["--load-seconds", "0.5"], env);
      devs.push(again);
      await until("the adoption note", () => /its agents adopt them/.test(again.output().stdout), {
        timeoutMs: 60_000,
        intervalMs: 200,
        describe,
      });
      for (const pid of engines) assertStringIncludes(again.output().stdout, `pid ${pid} port`);
      assertEquals(
        (await readDevEnv(dir))?.token,
        denv.token,
        "the admin token changed on restart",
      );
      // The token from before the restart still works: the API answers it.
      await until("every replica ready again", () => allReady(denv, trust.fetch), {
        timeoutMs: 90_000,
        intervalMs: 250,
        describe,
      });
      assertEquals(devEnginePids(dir).sort((a, b) => a - b), engines, "adopted, not restarted");
      assertStringIncludes(again.output().stdout, "kept from this directory's last start");

      // 6. SIGHUP (the terminal closed) stops it and every engine, adopted ones included.
      const againHub = devHubPid(again.output().stdout);
      assertOk(againHub !== null && isRunning(againHub), "a restart starts its fake hub again");
      again.child.kill("SIGHUP");
      assertEquals(await exitCode(again, 60_000, describe), 0, describe());
      assertEquals(engines.filter((p) => groupMembers(p).length > 0), [], "engines left");
      assertOk(!isRunning(againHub), "the fake hub outlived its dev's SIGHUP");

      // 7. The directory's agents are registered at its port: another --port is refused.
      const moved = spawnDev(otherBase, dir, [], env);
      devs.push(moved);
      assertEquals(await exitCode(moved, 60_000, describe), 1, describe());
      assertStringIncludes(
        moved.output().stderr,
        `llmgw: dev: this directory's cluster runs on --port ${base}, not ${otherBase}`,
      );
    } finally {
      for (const p of pins) p.close();
      await Promise.allSettled(devs.map((d) => stopDev(d)));
      for (const pid of engines) {
        try {
          Deno.kill(-pid, "SIGKILL");
        } catch {
          // Gone.
        }
      }
      for (const d of [dir, otherDir, bin]) {
        await Deno.remove(d, { recursive: true }).catch(() => {});
      }
    }
  },
});

Deno.test("llmgw dev: a --dir it cannot lock is one line and exit 1, before anything starts", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw-dev-nolock-" });
  try {
    // A file where the directory should be.
    const file = join(dir, "not-a-dir");
    Deno.writeTextFileSync(file, "");
    const [base] = devBases(PORTS, 1);
    let out = "";
    const code = await devCommand(
      ["--dir", file, "--port", String(base), "--quiet"],
      (t) => out += t,
      Promise.resolve(),
      (t) => out += t,
    );
    assertEquals(code, 1, out);
    assertStringIncludes(out, `llmgw: dev: Cannot lock ${file}: `);
    assertEquals(out.trimEnd().split("\n").length, 1, out);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
