import { join } from "node:path";
import { assertEquals, assertOk, assertRejects, assertStringIncludes } from "../tests/assert.ts";
import {
  killLeftovers,
  readPids,
  type Settled,
  settleWithin,
  survivorsAfter,
} from "../tests/proc_probe.ts";
import { CommandError, runCommand } from "./run_command.ts";

async function writeScript(dir: string, name: string, body: string): Promise<string> {
  const path = join(dir, name);
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}`);
  await Deno.chmod(path, 0o755);
  return path;
}

/** The CommandError a run ended with; fails when it succeeded or threw something else. */
function commandError(result: Settled<unknown>): CommandError {
  assertOk(!result.ok, "expected the command to fail");
  assertOk(result.error instanceof CommandError, `expected a CommandError, got ${result.error}`);
  return result.error;
}

Deno.test("runCommand returns exit code, stdout and stderr of a finished command", async () => {
  const out = await runCommand("/bin/sh", ["-c", "echo hi; echo err >&2; exit 3"]);
  assertEquals(out, { code: 3, signal: null, stdout: "hi\n", stderr: "err\n" });
});

Deno.test("runCommand passes arguments verbatim, without a shell", async () => {
  const out = await runCommand("/bin/echo", ["a b", "$HOME", "*"]);
  assertEquals(out.code, 0);
  assertEquals(out.stdout, "a b $HOME *\n");
});

Deno.test("runCommand keeps multi-byte characters split across reads intact", async () => {
  // 210 000 bytes of 3-byte characters: reads of any power-of-two size split some.
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  try {
    const path = join(dir, "euros.txt");
    await Deno.writeTextFile(path, "€".repeat(70_000));
    const out = await runCommand("/bin/cat", [path]);
    assertEquals(out.code, 0);
    assertEquals(out.stdout, "€".repeat(70_000));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runCommand reports a missing executable as not-found", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  try {
    const err = await assertRejects(
      () => runCommand(join(dir, "no-such-nvidia-smi"), ["--version"]),
      CommandError,
      "no-such-nvidia-smi",
    );
    assertEquals((err as CommandError).kind, "not-found");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runCommand reports a file without the execute bit as not-executable", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  try {
    const path = join(dir, "nvidia-smi");
    await Deno.writeTextFile(path, "#!/bin/sh\necho should not run\n");
    await Deno.chmod(path, 0o644);
    const err = await assertRejects(() => runCommand(path, []), CommandError);
    assertEquals((err as CommandError).kind, "not-executable");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runCommand kills a hung command and its background children on timeout", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  const selfFile = join(dir, "self.pid");
  const childFile = join(dir, "child.pid");
  const recorded = () => readPids(selfFile).concat(readPids(childFile));
  try {
    const script = await writeScript(
      dir,
      "hang.sh",
      `sleep 300 &\necho $! > '${childFile}'\necho $$ > '${selfFile}'\nsleep 300\n`,
    );
    const cleanUp = () => killLeftovers(recorded(), readPids(selfFile));
    const err = commandError(
      await settleWithin(runCommand(script, [], { timeoutMs: 300 }), 10_000, cleanUp),
    );
    assertEquals(err.kind, "timeout");
    assertStringIncludes(err.message, "did not finish within 300 ms");
    const self = readPids(selfFile);
    const child = readPids(childFile);
    const pids = [...self, ...child];
    assertEquals(self.length, 1, "the script did not record its pid before the timeout");
    assertEquals(child.length, 1, "the script did not record its child's pid before the timeout");
    // The script leads its own process group: nothing may be left in it either
    // (that covers the foreground `sleep 300`, whose pid was never recorded).
    assertEquals(await survivorsAfter(pids, self), []);
  } finally {
    try {
      killLeftovers(recorded(), readPids(selfFile));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});

Deno.test("runCommand kills a command that prints more than maxOutputBytes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  const selfFile = join(dir, "self.pid");
  try {
    const script = await writeScript(dir, "babble.sh", `echo $$ > '${selfFile}'\nexec yes\n`);
    const err = commandError(
      await settleWithin(
        runCommand(script, [], { maxOutputBytes: 64 * 1024, timeoutMs: 20_000 }),
        10_000,
        () => killLeftovers(readPids(selfFile), readPids(selfFile)),
      ),
    );
    assertEquals(err.kind, "too-large");
    assertStringIncludes(err.message, "printed more than 65536 bytes");
    const self = readPids(selfFile);
    assertEquals(self.length, 1, "the script did not record its pid");
    assertEquals(await survivorsAfter(self, self), []);
  } finally {
    try {
      killLeftovers(readPids(selfFile), readPids(selfFile));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});

Deno.test("runCommand stops a command at the output cap, not at the deadline", async () => {
  // 128 KiB and then silence: only the cap, not the 60 s deadline, may end it,
  // and killing must not rely on the writer dying of SIGPIPE.
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  const selfFile = join(dir, "self.pid");
  try {
    const script = await writeScript(
      dir,
      "burst.sh",
      `echo $$ > '${selfFile}'\nhead -c 131072 /dev/zero\nexec sleep 300\n`,
    );
    const err = commandError(
      await settleWithin(
        runCommand(script, [], { maxOutputBytes: 64 * 1024, timeoutMs: 60_000 }),
        10_000,
        () => killLeftovers(readPids(selfFile), readPids(selfFile)),
      ),
    );
    assertEquals(err.kind, "too-large");
    assertEquals(await survivorsAfter(readPids(selfFile), readPids(selfFile)), []);
  } finally {
    try {
      killLeftovers(readPids(selfFile), readPids(selfFile));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});

Deno.test("runCommand counts stderr against the output cap too", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  const selfFile = join(dir, "self.pid");
  try {
    const script = await writeScript(dir, "babble.sh", `echo $$ > '${selfFile}'\nexec yes >&2\n`);
    const err = commandError(
      await settleWithin(
        runCommand(script, [], { maxOutputBytes: 64 * 1024, timeoutMs: 20_000 }),
        10_000,
        () => killLeftovers(readPids(selfFile), readPids(selfFile)),
      ),
    );
    assertEquals(err.kind, "too-large");
    assertEquals(await survivorsAfter(readPids(selfFile), readPids(selfFile)), []);
  } finally {
    try {
      killLeftovers(readPids(selfFile), readPids(selfFile));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});

Deno.test("runCommand accepts output right at the cap", async () => {
  const out = await runCommand("/bin/sh", ["-c", "head -c 65536 /dev/zero"], {
    maxOutputBytes: 64 * 1024,
  });
  assertEquals(out.code, 0);
  assertEquals(out.stdout.length, 65536);
});

Deno.test("runCommand reports a command killed by a signal", async () => {
  const out = await runCommand("/bin/sh", ["-c", "kill -TERM $$"]);
  assertEquals(out.signal, "SIGTERM");
  assertOk(out.code !== 0, `exit code ${out.code}`);
});

Deno.test("CommandError carries its kind and name", () => {
  const e = new CommandError("timeout", "x did not finish");
  assertOk(e instanceof Error);
  assertEquals(e.name, "CommandError");
  assertEquals(e.kind, "timeout");
  assertStringIncludes(e.message, "did not finish");
});

Deno.test("runCommand returns when the command exits even if an escaped child holds its pipes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  const pidFile = join(dir, "pids");
  try {
    // The child leaves the process group (setsid) and keeps stdout open.
    const script = await writeScript(
      dir,
      "escape.sh",
      `setsid sh -c 'echo $$ >> ${pidFile}; exec sleep 30' &\necho done\nexit 0\n`,
    );
    const result = await settleWithin(
      runCommand(script, [], { timeoutMs: 20_000 }),
      15_000,
      () => killLeftovers(readPids(pidFile), []),
    );
    assertOk(result.ok, `expected success, got ${result.ok ? "" : String(result.error)}`);
    assertEquals(result.value.code, 0);
    assertEquals(result.value.stdout, "done\n");
  } finally {
    killLeftovers(readPids(pidFile), []);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runCommand's timeout is not extended by an escaped child holding the pipes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "llmgw_run_command_test_" });
  const pidFile = join(dir, "pids");
  try {
    const script = await writeScript(
      dir,
      "escape_and_hang.sh",
      `echo $$ >> ${pidFile}\nsetsid sh -c 'echo $$ >> ${pidFile}; exec sleep 30' &\nsleep 30\n`,
    );
    const result = await settleWithin(
      runCommand(script, [], { timeoutMs: 300 }),
      15_000,
      () => killLeftovers(readPids(pidFile), []),
    );
    assertEquals(commandError(result).kind, "timeout");
  } finally {
    killLeftovers(readPids(pidFile), []);
    await Deno.remove(dir, { recursive: true });
  }
});
