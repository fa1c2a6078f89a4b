/**
 * docs/deploy.md's conventions (runbook.ts): the real page parses into the
 * steps the rehearsal follows, and a page that breaks them is refused with
 * the line named.
 */
import { assertEquals, assertOk, assertThrows } from "../assert.ts";
import { parseRunbook, preludeFor, RunbookError } from "./runbook.ts";

const fence = "```";
const sh = (body: string) => `${fence}sh\n${body}\n${fence}\n`;

Deno.test("parseRunbook: runs, unit starts, copies and variables, in document order", () => {
  const page = [
    "# Title",
    sh("# on: all (variables)\nROOT=${ROOT:-}"),
    sh("# on: gpu (variables)\nX=1"),
    `${fence}yaml\nnot: a step\n${fence}`,
    sh("# on: control (install)\n./install.sh control\n"),
    sh("# on: control (start)\n# the unit\nsystemctl enable --now llmgw-control.service"),
    sh("# copy (token): join.token ca.crt from control to gpu gateway\nscp join.token h:"),
    "  " + sh("# on: gpu (check)\nllmgw-agent inventory").replaceAll("\n", "\n  "),
  ].join("\n");
  const book = parseRunbook(page, "p.md");
  assertEquals(book.steps, [
    { kind: "run", role: "control", step: "install", script: "./install.sh control\n", line: 15 },
    { kind: "start", role: "control", step: "start", unit: "llmgw-control.service", line: 21 },
    {
      kind: "copy",
      step: "token",
      from: "control",
      to: ["gpu", "gateway"],
      files: ["join.token", "ca.crt"],
      line: 27,
    },
    { kind: "run", role: "gpu", step: "check", script: "llmgw-agent inventory\n", line: 32 },
  ]);
  assertEquals(preludeFor(book, "gpu"), "ROOT=${ROOT:-}\nX=1\n");
  assertEquals(preludeFor(book, "control"), "ROOT=${ROOT:-}\n");
});

Deno.test("parseRunbook: what the rehearsal could not follow is refused, naming the line", () => {
  const cases: [string, string][] = [
    [sh("echo hi"), 'p.md:1: an sh block must start with "# on: ROLE (STEP)"'],
    [sh("# on: laptop (x)\ntrue"), 'p.md:1: unknown role "laptop"'],
    [sh("# on: gpu (Bad Step)\ntrue"), 'step "Bad Step" must be'],
    [sh("# on: gpu (a)\ntrue") + sh("# on: control (a)\ntrue"), 'p.md:5: step "a" appears twice'],
    [sh("# on: gpu (a)\nsystemctl restart llmgw-agent"), 'put "systemctl enable --now UNIT" alone'],
    [
      sh("# on: gpu (a)\ntrue\nsystemctl enable --now llmgw-agent.service"),
      'put "systemctl enable --now UNIT" alone',
    ],
    [sh("# on: gpu (a)\n# only a comment"), "step a has no command"],
    [sh("# copy (c): ../x from control to gpu\n"), 'copy "../x": a file name'],
    [sh("# on: gpu (variables)\nA=1") + sh("# on: gpu (variables)\nB=2"), "second variables"],
    [`${fence}sh\n# on: gpu (a)\ntrue\n`, "p.md:1: the fenced block never closes"],
  ];
  for (const [page, message] of cases) {
    assertThrows(() => parseRunbook(page, "p.md"), RunbookError, message);
  }
});

Deno.test("docs/deploy.md follows the conventions: every role's programs installed, every unit started", () => {
  const where = new URL("../../docs/deploy.md", import.meta.url);
  const book = parseRunbook(Deno.readTextFileSync(where), "docs/deploy.md");
  const starts = book.steps.flatMap((s) => s.kind === "start" ? [`${s.role}:${s.unit}`] : []);
  assertEquals(starts, [
    "control:llmgw-control.service",
    "gpu:llmgw-agent.service",
    "gateway:llmgw-gateway.service",
  ]);
  for (const role of ["control", "agent", "gateway"]) {
    assertOk(
      book.steps.some((s) =>
        s.kind === "run" && s.script.includes(`install.sh`) &&
        s.script.trimEnd().endsWith(` ${role}`)
      ),
      `docs/deploy.md installs ${role} with deploy/install.sh`,
    );
  }
  assertOk(book.variables.all !== undefined, "docs/deploy.md sets its variables");
});
