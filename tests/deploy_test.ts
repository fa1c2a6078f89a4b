/**
 * deploy/install.sh and the systemd units (design §3): what an install into a
 * temporary root writes, with which modes; that a second run changes nothing
 * and keeps an operator's edits; that the launcher runs the installed program;
 * and that scripts/systemd_verify.sh passes the units and fails a broken one.
 *
 * Every install goes into a temporary root, removed in a `finally`. A fake
 * `systemctl` and `useradd` first on PATH record any call, so a `--root`
 * install that reached for the host would fail the test.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAgentConfig } from "../agent/config.ts";
import { assertEquals, assertOk, assertStringIncludes } from "./assert.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const ROLES = ["agent", "control", "gateway"] as const;
const INSTALL = join(ROOT, "deploy/install.sh");
const MACHINE = join(ROOT, "tests/fixtures/machines/dgx_h100_8x_nics");

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(
  cmd: string,
  args: string[],
  options: { env?: Record<string, string>; clearEnv?: boolean } = {},
): Promise<Ran> {
  const out = await new Deno.Command(cmd, {
    args,
    cwd: ROOT,
    env: options.env,
    clearEnv: options.clearEnv,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code: out.code, stdout: text.decode(out.stdout), stderr: text.decode(out.stderr) };
}

/** The first of `dirs` (colon-separated) holding `name`, as its path. */
function which(dirs: string, name: string): string | undefined {
  for (const dir of dirs.split(":")) {
    try {
      Deno.statSync(join(dir, name));
      return join(dir, name);
    } catch {
      // not in this one
    }
  }
  return undefined;
}

/** The bundles the installer copies; built only when one is missing. */
async function ensureBundles(): Promise<void> {
  const missing = ROLES.some((role) => {
    try {
      return !Deno.statSync(join(ROOT, `dist/llmgw-${role}.js`)).isFile;
    } catch {
      return true;
    }
  });
  if (!missing) return;
  const built = await run("bash", ["scripts/bundle.sh"]);
  assertEquals(built.code, 0, `deno task bundle failed:\n${built.stderr}`);
}

/**
 * A temporary directory with a root to install into, a dist/ of symlinks to
 * the bundles (so a compiled dist/llmgw-ROLE in the checkout cannot change
 * which branch is tested), and a bin/ of recording fakes; removed afterwards.
 */
async function withSandbox(fn: (s: Sandbox) => Promise<void>): Promise<void> {
  await ensureBundles();
  const dir = await Deno.makeTempDir({ prefix: "llmgw_deploy_" });
  try {
    const s = new Sandbox(dir);
    await Deno.mkdir(s.root);
    await Deno.mkdir(s.dist);
    await Deno.mkdir(s.fakes);
    for (const role of ROLES) {
      await Deno.symlink(join(ROOT, `dist/llmgw-${role}.js`), join(s.dist, `llmgw-${role}.js`));
    }
    for (const name of ["systemctl", "useradd"]) {
      const fake = join(s.fakes, name);
      await Deno.writeTextFile(fake, `#!/bin/sh\necho "${name} $*" >>"${s.calls}"\nexit 1\n`);
      await Deno.chmod(fake, 0o755);
    }
    await fn(s);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

class Sandbox {
  constructor(readonly dir: string) {}
  get root(): string {
    return join(this.dir, "root");
  }
  get dist(): string {
    return join(this.dir, "dist");
  }
  get fakes(): string {
    return join(this.dir, "fakes");
  }
  /** Where the fakes record their calls. */
  get calls(): string {
    return join(this.dir, "calls.log");
  }
  path(p: string): string {
    return join(this.root, p);
  }
  install(args: string[]): Promise<Ran> {
    return run("bash", [INSTALL, "--root", this.root, "--dist", this.dist, ...args], {
      env: { PATH: `${this.fakes}:${Deno.env.get("PATH") ?? ""}` },
    });
  }
  /** The fakes' recorded calls ("" when none was made). */
  recordedCalls(): string {
    try {
      return Deno.readTextFileSync(this.calls);
    } catch {
      return "";
    }
  }
}

/** Every entry under `dir`: path → mode, inode, mtime and content (files) or link target. */
function snapshot(dir: string): Record<string, string> {
  const entries: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const e of Deno.readDirSync(join(dir, rel))) {
      const p = join(rel, e.name);
      const st = Deno.lstatSync(join(dir, p));
      const id = `mode=${
        (st.mode! & 0o7777).toString(8)
      } ino=${st.ino} mtime=${st.mtime?.getTime()}`;
      if (e.isDirectory) {
        entries[p + "/"] = id;
        walk(p);
      } else {
        entries[p] = `${id} ${Deno.readTextFileSync(join(dir, p))}`;
      }
    }
  };
  walk("");
  return entries;
}

function mode(path: string): string {
  return (Deno.statSync(path).mode! & 0o7777).toString(8).padStart(4, "0");
}

/** A unit file's settings, `Section.Key` → values in order; comments and blank lines dropped. */
function parseUnit(text: string): Map<string, string[]> {
  const settings = new Map<string, string[]>();
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header !== null) {
      section = header[1];
      continue;
    }
    const eq = line.indexOf("=");
    assertOk(eq > 0, `not a unit line: ${line}`);
    const key = `${section}.${line.slice(0, eq)}`;
    settings.set(key, [...(settings.get(key) ?? []), line.slice(eq + 1)]);
  }
  return settings;
}

function unitOf(role: string): Map<string, string[]> {
  return parseUnit(Deno.readTextFileSync(join(ROOT, `deploy/systemd/llmgw-${role}.service`)));
}

Deno.test("deploy: install.sh installs every role into a root: programs, launchers, units, configs, modes", async () => {
  await withSandbox(async (s) => {
    const first = await s.install([...ROLES]);
    assertEquals(first.code, 0, first.stderr);
    assertEquals(first.stderr, "");
    for (const role of ROLES) {
      const lib = s.path(`usr/local/lib/llmgw/llmgw-${role}.js`);
      assertEquals(
        Deno.readFileSync(lib),
        Deno.readFileSync(join(ROOT, `dist/llmgw-${role}.js`)),
        `${lib} is the bundle`,
      );
      assertEquals(mode(lib), "0644");
      assertEquals(mode(s.path(`usr/local/bin/llmgw-${role}`)), "0755");
      const unit = s.path(`etc/systemd/system/llmgw-${role}.service`);
      assertEquals(
        Deno.readTextFileSync(unit),
        Deno.readTextFileSync(join(ROOT, `deploy/systemd/llmgw-${role}.service`)),
      );
      assertEquals(mode(unit), "0644");
      const config = s.path(`etc/llmgw/${role}.json`);
      if (role === "control") {
        // `llmgw-control init --config-out` writes the control plane's config.
        assertOk(!existsSync(config), "no example control.json for init to trip over");
      } else {
        assertEquals(
          Deno.readTextFileSync(config),
          Deno.readTextFileSync(join(ROOT, `deploy/examples/${role}.json`)),
        );
        assertEquals(mode(config), "0644");
      }
      const env = s.path(`etc/llmgw/${role}.env`);
      assertEquals(
        Deno.readTextFileSync(env),
        Deno.readTextFileSync(join(ROOT, `deploy/examples/${role}.env`)),
      );
      assertEquals(mode(env), "0600", `${env} holds secrets`);
    }
    assertEquals(mode(s.path("etc/llmgw")), "0755");
    // --root: the host's systemd and users are left alone; the commands are printed instead.
    assertEquals(s.recordedCalls(), "");
    assertStringIncludes(first.stdout, "systemctl daemon-reload");
    assertStringIncludes(first.stdout, "useradd --system");
    for (const role of ROLES) {
      assertStringIncludes(first.stdout, `systemctl enable --now llmgw-${role}.service`);
    }
  });
});

Deno.test("deploy: the closing steps init the control plane before starting it and name only files that will exist", async () => {
  await withSandbox(async (s) => {
    const r = await s.install([...ROLES]);
    assertEquals(r.code, 0, r.stderr);
    const at = r.stdout.indexOf("done. Next:");
    assertOk(at >= 0, r.stdout);
    const steps = r.stdout.slice(at).split("\n").slice(1).map((l) => l.trim()).filter((l) =>
      l !== ""
    );
    // Issue #23 item 10: the steps named a control.json nothing had created, and no init.
    const init = steps.findIndex((l) =>
      /^\/usr\/local\/bin\/llmgw-control init --store \/var\/lib\/llmgw\/control .*--config-out \/etc\/llmgw\/control\.json/
        .test(l)
    );
    assertOk(init >= 0, `no llmgw-control init step:\n${steps.join("\n")}`);
    const start = steps.indexOf("systemctl enable --now llmgw-control.service");
    assertOk(init < start, `init after the start:\n${steps.join("\n")}`);
    // The store the init step makes is the one the unit's service uses.
    assertEquals(unitOf("control").get("Service.StateDirectory"), ["llmgw/control"]);
    steps.forEach((step, i) => {
      for (const file of step.match(/\/etc\/llmgw\/[\w.-]+/g) ?? []) {
        const created = steps.slice(0, i + 1).some((p) => p.includes(`--config-out ${file}`));
        assertOk(
          existsSync(s.path(file.slice(1))) || created,
          `"${step}" names ${file}, which neither install.sh nor a step before it creates`,
        );
      }
    });
  });
});

Deno.test("deploy: a second install changes nothing and keeps the operator's edits", async () => {
  await withSandbox(async (s) => {
    assertEquals((await s.install([...ROLES])).code, 0);
    const edited = '{"nvidia_smi": "/opt/nvidia/bin/nvidia-smi"}\n';
    await Deno.writeTextFile(s.path("etc/llmgw/agent.json"), edited);
    await Deno.writeTextFile(s.path("etc/llmgw/control.env"), "LLMGW_JOIN_TOKEN=operator-set\n");
    const before = snapshot(s.root);
    const second = await s.install(["gateway", ...ROLES]);
    assertEquals(second.code, 0, second.stderr);
    assertEquals(snapshot(s.root), before, "the second run rewrote something");
    assertEquals(Deno.readTextFileSync(s.path("etc/llmgw/agent.json")), edited);
    assertOk(!/\b(installed|created|removed)\b/.test(second.stdout), second.stdout);
    assertStringIncludes(second.stdout, `kept ${s.path("etc/llmgw/agent.json")} (exists)`);
  });
});

Deno.test("deploy: the installed launcher runs the agent bundle under its permissions", async () => {
  await withSandbox(async (s) => {
    assertEquals((await s.install(["agent"])).code, 0);
    const agent = s.path("usr/local/bin/llmgw-agent");
    for (const args of [["--help"], ["inventory", "--help"]]) {
      const r = await run(agent, args);
      assertEquals(r.code, 0, `llmgw-agent ${args.join(" ")}: ${r.stderr}`);
      assertStringIncludes(r.stdout, "Usage: llmgw agent inventory");
    }
    // The real job on a recorded machine: the reviewed inventory, as scripts/bundle.sh checks.
    const inv = await run(agent, ["inventory", "--json", "--config", join(MACHINE, "agent.json")]);
    assertEquals(inv.code, 0, inv.stderr);
    assertEquals(
      JSON.parse(inv.stdout),
      JSON.parse(Deno.readTextFileSync(join(MACHINE, "expected_inventory.json"))),
    );
  });
});

Deno.test("deploy: control and gateway launchers start under the permissions of scripts/roles.sh", async () => {
  await withSandbox(async (s) => {
    assertEquals((await s.install(["control", "gateway"])).code, 0);
    const roles = Deno.readTextFileSync(join(ROOT, "scripts/roles.sh"));
    for (const role of ["control", "gateway"]) {
      const perms = new RegExp(`^\\s*${role}\\) echo "([^"]*)" ;;`, "m").exec(roles)?.[1];
      assertOk(perms !== undefined, `scripts/roles.sh has permissions for ${role}`);
      const launcher = Deno.readTextFileSync(s.path(`usr/local/bin/llmgw-${role}`));
      assertStringIncludes(launcher, ` ${perms} "$lib/llmgw-${role}.js" "$@"`);
      const r = await run(s.path(`usr/local/bin/llmgw-${role}`), ["serve", "--help"]);
      assertEquals(r.code, 0, r.stderr);
      assertStringIncludes(r.stdout, `Usage: llmgw ${role} serve`);
    }
  });
});

Deno.test("deploy: a compiled binary in dist/ replaces the bundle and runs without deno", async () => {
  await withSandbox(async (s) => {
    assertEquals((await s.install(["--no-systemd", "agent"])).code, 0);
    // Stands in for `deno compile` output: any executable that dist/ holds.
    const compiled = join(s.dist, "llmgw-agent");
    await Deno.writeTextFile(compiled, '#!/bin/sh\necho "compiled agent: $*"\n');
    await Deno.chmod(compiled, 0o755);
    const r = await s.install(["--no-systemd", "agent"]);
    assertEquals(r.code, 0, r.stderr);
    assertStringIncludes(r.stdout, "removed");
    assertOk(!Deno.readDirSync(s.path("usr/local/lib/llmgw")).some((e) => e.name.endsWith(".js")));
    assertEquals(mode(s.path("usr/local/lib/llmgw/llmgw-agent")), "0755");
    const ran = await run(s.path("usr/local/bin/llmgw-agent"), ["run", "a b"]);
    assertEquals(ran.stdout, "compiled agent: run a b\n");
    assertOk(which(s.path("etc"), "systemd") === undefined, "--no-systemd installs no unit");
  });
});

Deno.test("deploy: --prefix moves the programs and the units' ExecStart with them", async () => {
  await withSandbox(async (s) => {
    const r = await s.install(["--prefix", "/opt/llmgw", "agent"]);
    assertEquals(r.code, 0, r.stderr);
    const unit = parseUnit(Deno.readTextFileSync(s.path("etc/systemd/system/llmgw-agent.service")));
    assertEquals(unit.get("Service.ExecStart"), [
      "/opt/llmgw/bin/llmgw-agent run --config /etc/llmgw/agent.json",
    ]);
    const help = await run(s.path("opt/llmgw/bin/llmgw-agent"), ["--help"]);
    assertEquals(help.code, 0, help.stderr);
  });
});

Deno.test("deploy: install.sh refuses bad input with one line, before writing anything", async () => {
  await withSandbox(async (s) => {
    const cases: [string[], string][] = [
      [[], "no role given"],
      [["nope"], 'unknown role "nope"'],
      [["--bogus", "agent"], 'unknown option "--bogus"'],
      [["--prefix", "relative", "agent"], "--prefix must be an absolute path"],
      [["--prefix", "/opt/a b", "agent"], "--prefix"],
    ];
    for (const [args, message] of cases) {
      const r = await s.install(args);
      assertEquals(r.code, 1, `${args.join(" ")}: ${r.stdout}`);
      assertStringIncludes(r.stderr, message);
      assertEquals(r.stderr.trim().split("\n").length, 1, r.stderr);
    }
    assertEquals([...Deno.readDirSync(s.root)], [], "nothing was written");
  });
});

Deno.test("deploy: without deno and without a compiled binary, install.sh names what is missing", async () => {
  await withSandbox(async (s) => {
    // A PATH with only what the script needs before that check.
    const bin = join(s.dir, "bare");
    await Deno.mkdir(bin);
    const dirname = which(Deno.env.get("PATH") ?? "", "dirname");
    assertOk(dirname !== undefined, "dirname is on PATH");
    await Deno.symlink(dirname, join(bin, "dirname"));
    const r = await run("/bin/bash", [INSTALL, "--root", s.root, "--dist", s.dist, "agent"], {
      clearEnv: true,
      env: { PATH: bin },
    });
    assertEquals(r.code, 1, r.stdout);
    assertStringIncludes(r.stderr, "deno not found on PATH");
    assertStringIncludes(r.stderr, `${s.dist}/llmgw-agent`);
    assertEquals([...Deno.readDirSync(s.root)], []);
  });
});

Deno.test("deploy: the units run each role's real command, take secrets from files, and keep engines", () => {
  const exec = {
    agent: "/usr/local/bin/llmgw-agent run --config /etc/llmgw/agent.json",
    control: "/usr/local/bin/llmgw-control serve --config /etc/llmgw/control.json",
    gateway: "/usr/local/bin/llmgw-gateway serve --config /etc/llmgw/gateway.json",
  };
  for (const role of ROLES) {
    const u = unitOf(role);
    assertEquals(u.get("Service.ExecStart"), [exec[role]]);
    assertEquals(u.get("Service.EnvironmentFile"), [`/etc/llmgw/${role}.env`]);
    assertEquals(u.get("Unit.After"), ["network-online.target"]);
    assertEquals(u.get("Unit.Wants"), ["network-online.target"]);
    assertEquals(u.get("Install.WantedBy"), ["multi-user.target"]);
    assertOk(u.has("Service.LimitNOFILE"), `${role}: LimitNOFILE`);
    assertEquals(u.get("Service.MemoryDenyWriteExecute"), undefined, `${role}: V8 needs W+X`);
    assertEquals(u.get("Service.DynamicUser"), undefined);
  }
  const agent = unitOf("agent");
  assertEquals(agent.get("Service.KillMode"), ["process"], "engines survive an agent restart");
  assertEquals(agent.get("Service.Restart"), ["always"]);
  assertEquals(agent.get("Service.User"), undefined, "the agent runs as root");
  assertEquals(agent.get("Service.StateDirectory"), ["llmgw/agent"]);
  // Engines inherit the unit's /tmp; a private one is deleted when the agent stops.
  assertEquals(agent.get("Service.PrivateTmp"), undefined);
  assertEquals(agent.get("Service.PrivateDevices"), undefined, "engines open the GPUs");
  for (const role of ["control", "gateway"] as const) {
    const u = unitOf(role);
    assertEquals(u.get("Service.User"), ["llmgw"]);
    assertEquals(u.get("Service.Group"), ["llmgw"]);
    for (const key of ["NoNewPrivileges", "ProtectHome", "PrivateTmp", "PrivateDevices"]) {
      assertEquals(u.get(`Service.${key}`), ["yes"], `${role}: ${key}`);
    }
    assertEquals(u.get("Service.ProtectSystem"), ["strict"]);
    assertEquals(u.get("Service.CapabilityBoundingSet"), [""]);
    assertEquals(u.get("Service.RestrictAddressFamilies"), ["AF_INET AF_INET6 AF_UNIX"]);
  }
  assertEquals(unitOf("control").get("Service.StateDirectory"), ["llmgw/control"]);
});

Deno.test("deploy: the example configs are what the roles read, and the env files hold no secret", () => {
  const example = (name: string) => Deno.readTextFileSync(join(ROOT, "deploy/examples", name));
  const agent = parseAgentConfig(example("agent.json"), "deploy/examples/agent.json");
  assertEquals(Object.keys(agent).sort(), ["fabrics", "nvidia_smi", "ports", "sysfs_root"]);
  assertEquals(JSON.parse(example("control.json")), {
    listen: "0.0.0.0:7070",
    store: "/var/lib/llmgw/control",
    gateway_listen: "off",
    tls_san: ["control.example.internal"],
  });
  assertEquals(JSON.parse(example("gateway.json")), {
    listen: "0.0.0.0:8443",
    control: ["https://control.example.internal:7070"],
    tls_cert: "/etc/llmgw/gateway.crt",
    tls_key: "/etc/llmgw/gateway.key",
  });
  const vars = {
    agent: ["LLMGW_CONTROL_URL", "LLMGW_JOIN_TOKEN"],
    control: ["LLMGW_ADMIN_TOKEN", "LLMGW_JOIN_TOKEN", "LLMGW_STORE_URL"],
    gateway: ["LLMGW_TOKEN", "LLMGW_CA"],
  };
  for (const role of ROLES) {
    const text = example(`${role}.env`);
    for (const line of text.split("\n")) {
      assertOk(line === "" || line.startsWith("#"), `${role}.env sets a value: ${line}`);
    }
    const named = [...text.matchAll(/^#(LLMGW_[A-Z_]+)=/gm)].map((m) => m[1]);
    assertEquals(named, vars[role], `${role}.env placeholders`);
  }
});

const HAS_SYSTEMD_ANALYZE = which(Deno.env.get("PATH") ?? "", "systemd-analyze") !== undefined;

Deno.test({
  name: "deploy: scripts/systemd_verify.sh passes the installed units",
  ignore: !HAS_SYSTEMD_ANALYZE, // systemd-analyze is absent on this host (CI has it)
  fn: async () => {
    await ensureBundles();
    const r = await run("bash", ["scripts/systemd_verify.sh"]);
    assertEquals(r.code, 0, r.stdout + r.stderr);
    assertStringIncludes(
      r.stdout,
      "verified llmgw-agent.service llmgw-control.service llmgw-gateway.service",
    );
  },
});

Deno.test({
  name: "deploy: scripts/systemd_verify.sh fails a unit with a misspelled directive or a bad value",
  ignore: !HAS_SYSTEMD_ANALYZE, // systemd-analyze is absent on this host (CI has it)
  fn: async () => {
    await ensureBundles();
    const cases: [string, string, string][] = [
      ["KillMode=process", "KilMode=process", "KilMode"],
      ["RestartSec=5s", "RestartSec=five", "five"],
    ];
    for (const [from, to, named] of cases) {
      // A copy of the checkout's deploy files with one line broken; dist/ is the real one.
      const dir = await Deno.makeTempDir({ prefix: "llmgw_verify_" });
      try {
        await Deno.mkdir(join(dir, "scripts"));
        for (const f of ["roles.sh", "systemd_verify.sh"]) {
          await Deno.copyFile(join(ROOT, "scripts", f), join(dir, "scripts", f));
        }
        const cp = await run("cp", ["-r", join(ROOT, "deploy"), join(dir, "deploy")]);
        assertEquals(cp.code, 0, cp.stderr);
        await Deno.symlink(join(ROOT, "dist"), join(dir, "dist"));
        const unit = join(dir, "deploy/systemd/llmgw-agent.service");
        const text = Deno.readTextFileSync(unit);
        assertOk(text.includes(`\n${from}\n`), `the agent unit has ${from}`);
        await Deno.writeTextFile(unit, text.replace(`\n${from}\n`, `\n${to}\n`));
        const r = await run("bash", [join(dir, "scripts/systemd_verify.sh")]);
        assertEquals(r.code, 1, `${to}: ${r.stdout}${r.stderr}`);
        assertStringIncludes(r.stderr, named);
        assertStringIncludes(r.stderr, "systemd_verify: FAILED");
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }
  },
});
