/**
 * Pid files keep the launch as desired beside the launch with its ports, so
 * an adopted shard is desired as the control plane sent it; a file from an
 * older agent has its ports opened again.
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import { desiredLaunch } from "../tests/shard_launch.ts";
import { withPorts } from "../engines/port_block.ts";
import {
  checkFingerprint,
  desiredLaunchOf,
  fingerprint,
  type PidRecord,
  readPidFile,
  writePidFile,
} from "./pid_file.ts";

/** A record of shard `s` launched from `desired` on the block at 20000. */
function record(desired = desiredLaunch("s", { port: 8123 })): PidRecord {
  return {
    version: 1,
    shard_id: "s",
    engine: "vllm",
    spec_hash: "h",
    pid: 4242,
    pgid: 4242,
    start_time: 1,
    cmdline: ["vllm", "serve"],
    port: 8123,
    ports: [],
    log_path: "/tmp/s.log",
    started_at: 0,
    launch: withPorts(desired, desired.port ?? 20_000),
    desired,
  };
}

Deno.test("pid file: the desired launch is kept and is what adoption runs", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/s.pid`;
    const written = record();
    writePidFile(path, written);
    // Owner-only: a flag engine's command line holds its key.
    assertEquals(Deno.statSync(path).mode! & 0o777, 0o600);
    const read = readPidFile(path);
    assertEquals("record" in read ? desiredLaunchOf(read.record) : read, written.desired);
    // A launch that named its own port keeps it: a restart serves there again.
    assertEquals(written.desired?.port, 8123);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("pid file: from an older agent, the launch's own ports are opened again", () => {
  const { desired: _, ...older } = record(desiredLaunch("s"));
  const got = desiredLaunchOf(older);
  assertEquals(got.port, null);
  assertEquals([got.world.rendezvous_port, got.world.leader_http_port], [null, null]);
});

Deno.test("pid file: a desired launch that is not an object is no pid file of this version", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/s.pid`;
    Deno.writeTextFileSync(path, JSON.stringify({ ...record(), desired: 5 }));
    assertEquals(readPidFile(path), { error: "not a pid file of this version" });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("pid file: a pid that now runs another command is named without the key in its argv", async () => {
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", "sleep 30; :", "sh", "--api-key", "k-secret-in-argv"],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    const fp = fingerprint(child.pid);
    assertOk(fp !== null, "the child runs");
    const check = checkFingerprint({ ...record(), ...fp, pid: child.pid, cmdline: ["vllm"] });
    assertOk(!check.ok, "another command");
    assertStringIncludes(check.why, "--api-key ***");
    assertOk(!check.why.includes("k-secret-in-argv"), check.why);
  } finally {
    child.kill("SIGKILL");
    await child.status;
  }
});
