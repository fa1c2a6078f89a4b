import { assertEquals } from "../tests/assert.ts";
import { isLocalModel, modelRevision, revisionProblem } from "./model_revision.ts";

Deno.test("revisionProblem: branches, tags, commits and PR refs pass; what git refuses is named (table)", () => {
  const cases: [string, string | null][] = [
    ["main", null],
    ["v1.2.0", null],
    ["0123456789abcdef0123456789abcdef01234567", null],
    ["refs/pr/12", null],
    ["release/2024-10", null],
    ["", "is empty"],
    ["my branch", "holds a space; a branch, tag or commit has none"],
    ["v1..v2", 'holds ".."; a branch, tag or commit has none'],
    ["../../etc", 'holds ".."; a branch, tag or commit has none'],
    ["main~1", 'holds "~"; a branch, tag or commit has none'],
    ["a:b", 'holds ":"; a branch, tag or commit has none'],
    ["tab\there", "holds a control character; a branch, tag or commit has none"],
    ["main@{1}", 'holds "@{"; a branch, tag or commit has none'],
    ["@", 'is "@", which git reserves'],
    ["-rf", 'starts with "-"'],
    ["/main", 'has an empty part between "/"'],
    ["a//b", 'has an empty part between "/"'],
    ["main/", 'has an empty part between "/"'],
    ["v1.", 'ends with "."'],
    ["a/.hidden", 'has a part starting with "." (.hidden)'],
    ["main.lock", 'has a part ending with ".lock" (main.lock)'],
    ["x".repeat(256), "is 256 characters; at most 255"],
  ];
  for (const [revision, want] of cases) assertEquals(revisionProblem(revision), want, revision);
});

Deno.test("modelRevision: main for a hub id that names none; none for a local path", () => {
  assertEquals(modelRevision("org/m", undefined), "main");
  assertEquals(modelRevision("org/m", "v2"), "v2");
  assertEquals(modelRevision("/models/llama", undefined), undefined);
  assertEquals(modelRevision("file:///models/llama", "v2"), undefined);
  assertEquals([isLocalModel("/m"), isLocalModel("file:///m"), isLocalModel("org/m")], [
    true,
    true,
    false,
  ]);
});
