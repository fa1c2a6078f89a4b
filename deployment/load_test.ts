import { assertEquals, assertOk, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { DeploymentError, parseDeployment, parseDeploymentText } from "./load.ts";
import { deploymentJsonSchema } from "./schema.ts";
import { readFixture } from "../tests/fixtures.ts";

const EXAMPLE = readFixture("../../examples/deployments/llama-70b.yaml");

Deno.test("the issue's example deployment parses with defaults applied", () => {
  const { deployment, warnings } = parseDeploymentText(EXAMPLE, "llama-70b.yaml");
  assertEquals(warnings, []);
  assertEquals(deployment.name, "llama-70b");
  assertEquals(deployment.replicas, 2);
  assertEquals(deployment.profiles.map((p) => p.name), ["h100-fp8", "a100-two-nodes"]);
  const a100 = deployment.profiles[1];
  assertEquals(a100.pipeline_parallel, 1);
  assertEquals(a100.quantization, "none");
  assertEquals(a100.engine_args, []);
  assertEquals(a100.node_selector, {});
  assertEquals(deployment.profiles[0].engine_args, ["--max-model-len", "32768"]);
});

Deno.test("JSON and YAML go through the same schema", () => {
  const json = JSON.stringify({
    name: "m",
    model: "org/m",
    profiles: [{ name: "p", engine: "vllm", gpu_class: "l40s-45g", tensor_parallel: 2 }],
  });
  const { deployment } = parseDeploymentText(json, "m.json");
  assertEquals(deployment.served_model_name, "m");
  assertEquals(deployment.replicas, 1);
  assertEquals(deployment.placement, "pack");
  // gpus_per_node defaults to TP × PP / nodes.
  assertEquals(deployment.profiles[0].gpus_per_node, 2);
});

function issuesOf(text: string): string[] {
  const e = assertThrows(
    () => parseDeploymentText(text, "d.yaml"),
    DeploymentError,
  ) as DeploymentError;
  return e.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

Deno.test("every kind of mistake names its field path", () => {
  const base = "name: m\nmodel: org/m\n";
  const cases: [string, string][] = [
    ["model: m\nprofiles: []\n", "name: "],
    [base + "profiles: []\n", "profiles: Too small"],
    [
      base +
      "replicas: 1.5\nprofiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 1}]\n",
      "replicas: ",
    ],
    [
      base +
      "placement: scatter\nprofiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 1}]\n",
      "placement: ",
    ],
    [
      base + "profiles: [{name: p, engine: vllm, gpu_class: H100, tensor_parallel: 1}]\n",
      "profiles.0.gpu_class: must be a GPU class",
    ],
    [
      base + "profiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 0}]\n",
      "profiles.0.tensor_parallel: ",
    ],
    [
      base +
      "profiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 1, tp: 2}]\n",
      'profiles.0: unknown field "tp"',
    ],
    [
      base +
      "profiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 1, env: {1BAD: x}}]\n",
      "profiles.0.env.1BAD",
    ],
    [
      base + "profiles: [{name: p, engine: trtllm, gpu_class: h100-80g, tensor_parallel: 1}]\n",
      'profiles.0.engine: profile "p": unknown engine "trtllm" (known: sglang, vllm)',
    ],
    [
      base +
      "profiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 4, gpus_per_node: 8}]\n",
      'profiles.0.gpus_per_node: profile "p": nodes × gpus_per_node (1 × 8 = 8) must equal tensor_parallel × pipeline_parallel (4 × 1 = 4)',
    ],
    [
      base +
      "profiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 3, nodes: 2}]\n",
      'profiles.0.gpus_per_node: profile "p": not given, and tensor_parallel × pipeline_parallel (3 × 1) does not divide evenly over 2 nodes',
    ],
    [
      base +
      "profiles: [{name: p, engine: vllm, gpu_class: h100-80g, tensor_parallel: 1}, {name: p, engine: vllm, gpu_class: a100-80g, tensor_parallel: 1}]\n",
      'profiles.1.name: profile "p" is also profile 0',
    ],
    ["name: [\n", ": not valid YAML or JSON"],
    ['{"name": ', ": not valid YAML or JSON"],
    // Read as apply reads it (deployment/documents.ts): a list is its items.
    ["- a\n- b\n", ": holds 2 deployments; give one per file"],
    ["- a\n", ": Invalid input: expected object"],
    ["name: a\n---\nname: b\n", ": holds 2 deployments; give one per file"],
    ["name: a\n---\nname: [\n", ": document 2 is not valid YAML or JSON: "],
    ["", ": holds no deployment"],
  ];
  for (const [text, expected] of cases) {
    const issues = issuesOf(text);
    assertOk(
      issues.some((i) => i.includes(expected)),
      `${JSON.stringify(text)}: ${issues.join(" | ")}`,
    );
  }
});

Deno.test("tensor parallel must divide a node's GPUs or span whole nodes", () => {
  const base =
    "name: m\nmodel: org/m\nprofiles:\n  - {name: p, engine: vllm, gpu_class: h100-80g, ";
  // TP 16 over 2 nodes × 8: spans whole nodes.
  parseDeploymentText(base + "tensor_parallel: 16, nodes: 2, gpus_per_node: 8}\n", "d.yaml");
  // TP 8 × PP 2 over 2 nodes: one TP group per node.
  parseDeploymentText(base + "tensor_parallel: 8, pipeline_parallel: 2, nodes: 2}\n", "d.yaml");
  // TP 3 × PP 2 on the 6 GPUs of one node: two TP groups of 3.
  parseDeploymentText(base + "tensor_parallel: 3, pipeline_parallel: 2}\n", "d.yaml");
  // TP 6 over 3 nodes × 4 GPUs with PP 2: 6 neither divides 4 nor is a multiple of it.
  const issues = issuesOf(
    base + "tensor_parallel: 6, pipeline_parallel: 2, nodes: 3, gpus_per_node: 4}\n",
  );
  assertStringIncludes(
    issues.join("|"),
    "tensor_parallel 6 must divide the GPUs of a node (4) or span whole nodes",
  );
});

Deno.test("validation against the cluster: absent classes warn, fp8 below 8.9 is refused", () => {
  const text = EXAMPLE;
  const classes = {
    computeCapabilities: new Map([["h100-80g", new Set(["9.0"])]]),
  };
  const { warnings } = parseDeploymentText(text, "d.yaml", { classes });
  assertEquals(warnings.map((w) => w.path), [["profiles", 1, "gpu_class"]]);
  assertStringIncludes(warnings[0].message, "no node in the cluster has a100-80g GPUs");
  const ampere = { computeCapabilities: new Map([["h100-80g", new Set(["8.0"])]]) };
  const e = assertThrows(
    () => parseDeploymentText(text, "d.yaml", { classes: ampere }),
    DeploymentError,
  );
  assertStringIncludes(
    e.message,
    'profiles[0].quantization: profile "h100-fp8": fp8 needs compute capability ≥ 8.9',
  );
});

/** Compute capabilities seen per class: an A100-only class and an H100 one. */
const AMPERE_AND_HOPPER = {
  computeCapabilities: new Map([
    ["a100-80g", new Set(["8.0"])],
    ["h100-80g", new Set(["9.0"])],
  ]),
};

/** A one-profile deployment on `cls` with `quantization`. */
function quantized(engine: string, quantization: string, cls: string): string {
  return `name: m\nmodel: org/m\nprofiles:\n  - {name: p, engine: ${engine}, gpu_class: ${cls}, ` +
    `tensor_parallel: 2, quantization: ${quantization}}\n`;
}

// fp8 under other names, as the engines list them (deployment/quantization.ts).
for (
  const [engine, q, what] of [
    ["vllm", "modelopt", "modelopt (an fp8 format)"],
    ["sglang", "w8a8_fp8", "w8a8_fp8"],
    ["sglang", "modelopt_fp8", "modelopt_fp8"],
  ]
) {
  Deno.test(`${engine} ${q} is refused on an A100-only class and accepted on H100`, () => {
    const e = assertThrows(
      () =>
        parseDeploymentText(quantized(engine, q, "a100-80g"), "d.yaml", {
          classes: AMPERE_AND_HOPPER,
        }),
      DeploymentError,
    ) as DeploymentError;
    assertEquals(e.issues.map((i) => i.path), [["profiles", 0, "quantization"]]);
    assertStringIncludes(
      e.issues[0].message,
      `profile "p": ${what} needs compute capability ≥ 8.9, but a100-80g GPUs have 8.0`,
    );
    const ok = parseDeploymentText(quantized(engine, q, "h100-80g"), "d.yaml", {
      classes: AMPERE_AND_HOPPER,
    });
    assertEquals(ok.warnings, []);
    assertEquals(ok.deployment.profiles[0].quantization, q);
  });
}

Deno.test("a non-fp8 quantization is not refused on A100", () => {
  for (const q of ["awq", "gptq_marlin", "modelopt_fp4", "compressed-tensors"]) {
    const { warnings } = parseDeploymentText(quantized("vllm", q, "a100-80g"), "d.yaml", {
      classes: AMPERE_AND_HOPPER,
    });
    assertEquals(warnings, [], q);
  }
});

Deno.test("third-party engines are accepted when known", () => {
  const raw = {
    name: "m",
    model: "org/m",
    profiles: [{ name: "p", engine: "tgi", gpu_class: "l4-22g", tensor_parallel: 1 }],
  };
  assertThrows(() => parseDeployment(raw, "api"), DeploymentError, 'unknown engine "tgi"');
  parseDeployment(raw, "api", { knownEngines: new Set(["vllm", "sglang", "tgi"]) });
});

Deno.test("the published JSON Schema is the generated one", () => {
  const published = JSON.parse(readFixture("../../schemas/deployment.schema.json"));
  assertEquals(published, deploymentJsonSchema());
  assertEquals(published.required, ["name", "model", "profiles"]);
});

Deno.test("revision: main by default for a hub model, refused on a local path, bad refs named; pinned false by default", () => {
  const profiles = [{ name: "p", engine: "vllm", gpu_class: "l4-22g", tensor_parallel: 1 }];
  const hub = parseDeployment({ name: "m", model: "org/m", profiles }, "api").deployment;
  assertEquals([hub.revision, hub.pinned], ["main", false]);
  const local = parseDeployment({ name: "m", model: "/models/m", profiles }, "api").deployment;
  assertEquals(local.revision, undefined);
  assertThrows(
    () =>
      parseDeployment({ name: "m", model: "file:///models/m", revision: "v2", profiles }, "api"),
    DeploymentError,
    "revision: a local path model (file:///models/m) takes no revision",
  );
  assertThrows(
    () => parseDeployment({ name: "m", model: "org/m", revision: "v1..v2", profiles }, "api"),
    DeploymentError,
    'revision: holds ".."',
  );
  assertThrows(
    () => parseDeployment({ name: "m", model: "org/m", pinned: "yes", profiles }, "api"),
    DeploymentError,
    "pinned",
  );
});
