/**
 * The one fp8 rule (design §6.2): a quantization that computes in fp8 runs
 * only on GPUs of compute capability ≥ 8.9 (Ada, Hopper and newer). Below
 * that the engines do not fail, they fall back to weight-only fp8 through
 * Marlin kernels on SM 8.0–8.8 (vLLM docs/features/quantization/fp8.md:
 * "Ampere GPUs are supported for W8A16 (weight-only FP8) utilizing Marlin
 * kernels"; SGLang PR #8990), which is slower, so llmgw refuses instead.
 * Deployment validation, placement and the engines' launch checks all ask
 * {@link needsFp8Hardware}.
 *
 * Which `--quantization` values are fp8, from the engines' sources:
 *
 * - vLLM: `QuantizationMethods` in
 *   `vllm/model_executor/layers/quantization/__init__.py` (the CLI choices)
 *   has `fp8`, `ptpc_fp8`, `fbgemm_fp8`, `mxfp8`, older releases
 *   `deepgemm_fp8`, newer ones `modelopt_mxfp8` and `deepseek_v4_fp8`; the
 *   online shorthands of `vllm/config/quantization.py` (`_ONLINE_SHORTHANDS`)
 *   add `fp8_per_tensor`, `fp8_per_block`, `fp8_per_channel`. Two have no
 *   "fp8" in the name: `modelopt` is `ModelOptFp8Config` (min capability 89,
 *   `modelopt.py`) and `modelopt_mixed` is `ModelOptMixedPrecisionConfig`
 *   (fp8 layers next to NVFP4 ones).
 * - SGLang: `QUANTIZATION_CHOICES` in `python/sglang/srt/arg_groups/choices.py`
 *   has `fp8`, `mxfp8`, `w8a8_fp8`, `w4afp8`, `modelopt_fp8`,
 *   `quark_int4fp8_moe`, and again `modelopt` (`ModelOptFp8Config`,
 *   "Auto-detect, defaults to FP8" in `layers/quantization/__init__.py`) and
 *   `modelopt_mixed`.
 *
 * Not fp8 by name: the FP4 formats (`modelopt_fp4`, `mxfp4`, `nvfp4_online`,
 * `petit_nvfp4`, `fp_quant`), whose fp8 block scales are not fp8 compute;
 * and `compressed-tensors`, `quark` and `torchao`, whose scheme (fp8 or not)
 * is in the checkpoint, where llmgw cannot see it, so the engine's own check
 * is all there is. An unknown name containing "fp8" (a new shorthand) counts
 * as fp8.
 *
 * @module
 */

/** Minimum compute capability for fp8 (design §6.2: refused below, not silently slower). */
export const FP8_MIN_COMPUTE_CAPABILITY = "8.9";

/** The fp8 quantizations whose names do not say "fp8" (see the module doc for sources). */
const FP8_WITHOUT_FP8_IN_NAME: ReadonlySet<string> = new Set(["modelopt", "modelopt_mixed"]);

/** Whether a `--quantization` value computes in fp8 and so needs compute capability ≥ 8.9. */
export function needsFp8Hardware(quantization: string): boolean {
  const q = quantization.toLowerCase();
  return q.includes("fp8") || FP8_WITHOUT_FP8_IN_NAME.has(q);
}

/** Compares compute capabilities such as "8.9" and "10.0" numerically. */
export function compareComputeCapability(a: string, b: string): number {
  const [am, an] = a.split(".").map(Number);
  const [bm, bn] = b.split(".").map(Number);
  return am !== bm ? am - bm : (an ?? 0) - (bn ?? 0);
}

/** Whether a GPU of this compute capability runs fp8 natively; unknown (null) counts as no. */
export function fp8Capable(computeCapability: string | null): boolean {
  return computeCapability !== null &&
    compareComputeCapability(computeCapability, FP8_MIN_COMPUTE_CAPABILITY) >= 0;
}

/**
 * The words every fp8 refusal starts with, e.g. "fp8 needs compute
 * capability ≥ 8.9" or "modelopt (an fp8 format) needs …", so the three
 * places that refuse say it the same way.
 */
export function fp8Requirement(quantization: string): string {
  const what = quantization.toLowerCase().includes("fp8")
    ? quantization
    : `${quantization} (an fp8 format)`;
  return `${what} needs compute capability ≥ ${FP8_MIN_COMPUTE_CAPABILITY}`;
}
