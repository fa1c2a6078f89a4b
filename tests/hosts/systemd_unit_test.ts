/**
 * The rehearsal's reading of systemd units (systemd_unit.ts): on llmgw's own
 * units, on hand-made edge cases, and on what it must refuse.
 */
import { assertEquals, assertThrows } from "../assert.ts";
import {
  parseEnvironmentFile,
  rooted,
  serviceEnvironment,
  serviceSpec,
  splitWords,
  SYSTEMD_PATH,
  UnitFileError,
} from "./systemd_unit.ts";

const unit = (role: string) =>
  Deno.readTextFileSync(new URL(`../../deploy/systemd/llmgw-${role}.service`, import.meta.url));

Deno.test("serviceSpec: llmgw's agent unit, every path it names under the host's root", () => {
  const spec = serviceSpec(unit("agent"), "llmgw-agent.service", "/tmp/r/agent-a/");
  assertEquals(spec.argv, [
    "/tmp/r/agent-a/usr/local/bin/llmgw-agent",
    "run",
    "--config",
    "/tmp/r/agent-a/etc/llmgw/agent.json",
  ]);
  assertEquals(spec.environment, { DENO_DIR: "/tmp/r/agent-a/var/cache/llmgw/agent" });
  assertEquals(spec.environmentFiles, [
    { path: "/tmp/r/agent-a/etc/llmgw/agent.env", optional: false },
  ]);
  assertEquals(spec.stateDirectories, ["/tmp/r/agent-a/var/lib/llmgw/agent"]);
  assertEquals(spec.stateDirectoryMode, 0o700);
  assertEquals(spec.cacheDirectories, ["/tmp/r/agent-a/var/cache/llmgw/agent"]);
  assertEquals(spec.workingDirectory, "/tmp/r/agent-a/");
  assertEquals(spec.user, null);
  assertEquals(spec.killMode, "process");
});

Deno.test("serviceSpec: the control and gateway units run as llmgw, control in its state dir", () => {
  const control = serviceSpec(unit("control"), "llmgw-control.service", "/r");
  assertEquals(control.argv, [
    "/r/usr/local/bin/llmgw-control",
    "serve",
    "--config",
    "/r/etc/llmgw/control.json",
  ]);
  assertEquals(control.workingDirectory, "/r/var/lib/llmgw/control");
  assertEquals(control.user, "llmgw");
  assertEquals(control.killMode, "control-group");
  const gateway = serviceSpec(unit("gateway"), "llmgw-gateway.service", "/r");
  assertEquals(gateway.argv[0], "/r/usr/local/bin/llmgw-gateway");
  assertEquals(gateway.stateDirectories, []);
  assertEquals(gateway.user, "llmgw");
});

Deno.test("serviceEnvironment: systemd's PATH, Environment=, then the files, then its directories", () => {
  const spec = serviceSpec(
    [
      "[Service]",
      "ExecStart=/usr/bin/x",
      "Environment=A=1 'B=two words' C=/var/c",
      "EnvironmentFile=/etc/x.env",
      "EnvironmentFile=-/etc/missing.env",
      "StateDirectory=x/a x/b",
      "CacheDirectory=x",
    ].join("\n"),
    "x.service",
    "/r",
  );
  const files = new Map([[
    "/r/etc/x.env",
    '# secrets\nA=from-file\n; also a comment\n\nD="q v"\n',
  ]]);
  assertEquals(serviceEnvironment(spec, files), {
    PATH: SYSTEMD_PATH,
    A: "from-file",
    B: "two words",
    C: "/r/var/c",
    D: "q v",
    STATE_DIRECTORY: "/r/var/lib/x/a:/r/var/lib/x/b",
    CACHE_DIRECTORY: "/r/var/cache/x",
  });
  assertThrows(
    () => serviceEnvironment(spec, new Map()),
    UnitFileError,
    "EnvironmentFile /r/etc/x.env is missing",
  );
});

Deno.test("splitWords: quotes group, backslashes escape", () => {
  assertEquals(splitWords(`a  "b c" 'd"e' f\\ g ""`, "t"), ["a", "b c", 'd"e', "f g", ""]);
  assertEquals(splitWords("", "t"), []);
});

Deno.test("serviceSpec and the parsers refuse what they would run differently from systemd", () => {
  const cases: [string, string][] = [
    ["[Service]\nExecStart=/bin/x $HOME", '"$" expansion is not supported'],
    ["[Service]\nExecStart=/bin/x %i", '"%" expansion is not supported'],
    ["[Service]\nExecStart=-/bin/x", 'ExecStart prefix "-"'],
    ["[Service]\nExecStart=/bin/x\nExecStart=/bin/y", "one ExecStart line, has 2"],
    ["[Service]\nType=forking\nExecStart=/bin/x", "Type=forking is not supported"],
    ["[Service]\nExecStart=x", "must start with an absolute path"],
    ["[Service]\nExecStart=/bin/x 'open", "an unterminated '"],
    ["[Service]\nExecStart=/bin/x\nStateDirectory=../etc", "must be a relative path"],
    ["[Service]\nExecStart=/bin/x\nStateDirectoryMode=rwx", "is not octal"],
    ["[Service]\nExecStart=/bin/x\nEnvironment=1A=b", 'Environment "1A=b" is not KEY=VALUE'],
    ["ExecStart=/bin/x", 'x.service:1: expected "Key=value" inside a [Section]'],
    ["[Service]\nExecStart=/bin/x \\\n  y", "x.service:2: continued lines are not supported"],
  ];
  for (const [text, message] of cases) {
    assertThrows(() => serviceSpec(text, "x.service", "/r"), UnitFileError, message);
  }
  assertThrows(
    () => parseEnvironmentFile("A=1\nexport B=2\n", "x.env"),
    UnitFileError,
    'x.env:2: expected KEY=VALUE, got "export B=2"',
  );
});

Deno.test("rooted moves absolute paths only", () => {
  assertEquals(rooted("/r/", "/etc/x"), "/r/etc/x");
  assertEquals(rooted("", "/etc/x"), "/etc/x");
  assertEquals(rooted("/r", "run"), "run");
});
