/**
 * Table and property tests for the one fp8 rule (design §6.2): every
 * `--quantization` value vLLM and SGLang accept, classified, and the compute
 * capability comparison behind it.
 */
import fc from "fast-check";
import { assertEquals, assertOk } from "../tests/assert.ts";
import {
  compareComputeCapability,
  FP8_MIN_COMPUTE_CAPABILITY,
  fp8Capable,
  fp8Requirement,
  needsFp8Hardware,
} from "./quantization.ts";

/**
 * vLLM's `--quantization` choices (`QuantizationMethods`, older and newer
 * releases, plus the online shorthands of `vllm/config/quantization.py`) and
 * whether each computes in fp8.
 */
const VLLM_CHOICES: [string, boolean][] = [
  ["fp8", true],
  ["ptpc_fp8", true],
  ["fbgemm_fp8", true],
  ["deepgemm_fp8", true],
  ["mxfp8", true],
  ["modelopt", true], // ModelOptFp8Config
  ["modelopt_mxfp8", true],
  ["modelopt_mixed", true], // fp8 and NVFP4 layers
  ["deepseek_v4_fp8", true],
  ["fp8_per_tensor", true],
  ["fp8_per_block", true],
  ["fp8_per_channel", true],
  ["modelopt_fp4", false],
  ["mxfp4", false],
  ["gpt_oss_mxfp4", false],
  ["nvfp4_per_token", false],
  ["petit_nvfp4", false],
  ["fp_quant", false], // MXFP4/NVFP4
  ["awq", false],
  ["auto_awq", false],
  ["awq_marlin", false],
  ["gptq", false],
  ["auto_gptq", false],
  ["gptq_marlin", false],
  ["gptq_marlin_24", false],
  ["gptq_bitblas", false],
  ["bitblas", false],
  ["marlin", false],
  ["aqlm", false],
  ["gguf", false],
  ["bitsandbytes", false],
  ["compressed-tensors", false], // scheme in the checkpoint
  ["experts_int8", false],
  ["int8_per_channel_weight_only", false],
  ["tpu_int8", false],
  ["moe_wna16", false],
  ["humming", false],
  ["torchao", false],
  ["quark", false],
  ["inc", false],
  ["auto-round", false],
  ["ipex", false],
  ["cpu_awq", false],
  ["online", false], // the scheme is in --quantization-config
];

/** SGLang's `--quantization` choices (`QUANTIZATION_CHOICES`) and whether each computes in fp8. */
const SGLANG_CHOICES: [string, boolean][] = [
  ["fp8", true],
  ["mxfp8", true],
  ["w8a8_fp8", true],
  ["w4afp8", true],
  ["modelopt", true], // "Auto-detect, defaults to FP8"
  ["modelopt_fp8", true],
  ["modelopt_mixed", true],
  ["quark_int4fp8_moe", true],
  ["modelopt_fp4", false],
  ["nvfp4_online", false],
  ["petit_nvfp4", false],
  ["mxfp4", false],
  ["quark_mxfp4", false],
  ["mxfp_w4a8", false], // NPU only
  ["w8a8_int8", false],
  ["awq", false],
  ["awq_marlin", false],
  ["gptq", false],
  ["gptq_marlin", false],
  ["bitsandbytes", false],
  ["gguf", false],
  ["moe_wna16", false],
  ["auto-round", false],
  ["auto-round-int8", false],
  ["compressed-tensors", false],
  ["modelslim", false],
  ["quark", false],
  ["mlx_q4", false],
  ["mlx_q8", false],
  ["unquant", false],
  ["humming", false],
];

for (const [engine, table] of [["vllm", VLLM_CHOICES], ["sglang", SGLANG_CHOICES]] as const) {
  Deno.test(`needsFp8Hardware classifies every ${engine} --quantization choice`, () => {
    const wrong = table.filter(([q, fp8]) => needsFp8Hardware(q) !== fp8);
    assertEquals(wrong.map(([q, fp8]) => `${q} should be ${fp8 ? "" : "not "}fp8`), []);
  });
}

Deno.test("needsFp8Hardware: none is not fp8, case does not matter", () => {
  assertEquals(needsFp8Hardware("none"), false);
  assertEquals(needsFp8Hardware("FP8"), true);
  assertEquals(needsFp8Hardware("ModelOpt"), true);
});

Deno.test("needsFp8Hardware: any name containing fp8 is fp8", () => {
  fc.assert(
    fc.property(
      fc.stringMatching(/^[a-z0-9_-]{0,12}$/),
      fc.stringMatching(/^[a-z0-9_-]{0,12}$/),
      (before, after) => needsFp8Hardware(`${before}fp8${after}`),
    ),
  );
});

const CAPABILITIES: { a: string; b: string; sign: -1 | 0 | 1 }[] = [
  { a: "8.0", b: "8.9", sign: -1 },
  { a: "8.9", b: "8.9", sign: 0 },
  { a: "9.0", b: "8.9", sign: 1 },
  { a: "10.0", b: "9.0", sign: 1 }, // numeric, not string, order
  { a: "12.1", b: "12.0", sign: 1 },
  { a: "9", b: "9.0", sign: 0 },
];

for (const c of CAPABILITIES) {
  Deno.test(`compareComputeCapability(${c.a}, ${c.b}) has sign ${c.sign}`, () => {
    assertEquals(Math.sign(compareComputeCapability(c.a, c.b)), c.sign);
    assertEquals(Math.sign(compareComputeCapability(c.b, c.a)), -c.sign || 0);
  });
}

const HARDWARE: { cc: string | null; fp8: boolean }[] = [
  { cc: "7.5", fp8: false }, // T4
  { cc: "8.0", fp8: false }, // A100
  { cc: "8.6", fp8: false }, // A10, RTX 3090
  { cc: "8.9", fp8: true }, // L40S, L4
  { cc: "9.0", fp8: true }, // H100, H200
  { cc: "10.0", fp8: true }, // B200
  { cc: null, fp8: false }, // unknown: not proven safe
  { cc: "n/a", fp8: false }, // unparseable: not proven safe
];

for (const c of HARDWARE) {
  Deno.test(`fp8Capable(${c.cc}) is ${c.fp8}`, () => {
    assertEquals(fp8Capable(c.cc), c.fp8);
  });
}

Deno.test("fp8Capable agrees with the comparison for every major.minor", () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 9 }), (major, minor) => {
      const cc = `${major}.${minor}`;
      return fp8Capable(cc) === (major > 8 || (major === 8 && minor >= 9));
    }),
  );
});

Deno.test("fp8Requirement names the quantization and says fp8 when the name does not", () => {
  assertEquals(
    fp8Requirement("fp8"),
    `fp8 needs compute capability ≥ ${FP8_MIN_COMPUTE_CAPABILITY}`,
  );
  assertEquals(fp8Requirement("w8a8_fp8"), "w8a8_fp8 needs compute capability ≥ 8.9");
  assertEquals(
    fp8Requirement("modelopt"),
    "modelopt (an fp8 format) needs compute capability ≥ 8.9",
  );
  assertOk(fp8Requirement("modelopt_mixed").startsWith("modelopt_mixed (an fp8 format)"));
});
