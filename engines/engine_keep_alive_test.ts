/**
 * Tests of the engines' keep-alive variables in a profile's env
 * (engines/engine_keep_alive.ts).
 */
import { assertEquals, assertOk, assertStringIncludes } from "../tests/assert.ts";
import {
  ENGINE_CLIENT_IDLE_MS,
  engineKeepAliveProblem,
  MIN_ENGINE_KEEP_ALIVE_SECONDS,
  pythonInt,
  UVICORN_KEEP_ALIVE_SECONDS,
} from "./engine_keep_alive.ts";

Deno.test("pythonInt: what Python's int() takes, and null where it raises", () => {
  const cases: [string, number | null][] = [
    ["5", 5],
    [" 1_0 ", 10],
    ["-3", -3],
    ["+4", 4],
    ["1__0", null],
    ["_1", null],
    ["0.5", null],
    ["soon", null],
    ["", null],
  ];
  for (const [text, n] of cases) assertEquals(pythonInt(text), n, JSON.stringify(text));
});

Deno.test("engine keep-alive: at least the clients' idle time plus a second, a whole number, for either engine's variable", () => {
  assertEquals(MIN_ENGINE_KEEP_ALIVE_SECONDS * 1000 > ENGINE_CLIENT_IDLE_MS, true);
  assertEquals(UVICORN_KEEP_ALIVE_SECONDS >= MIN_ENGINE_KEEP_ALIVE_SECONDS, true);
  assertEquals(MIN_ENGINE_KEEP_ALIVE_SECONDS, 5);
  for (const key of ["VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "SGLANG_TIMEOUT_KEEP_ALIVE"]) {
    for (const ok of ["5", " 7 ", "1_0", "3600"]) {
      assertEquals(engineKeepAliveProblem(key, ok), null, `${key}=${ok}`);
    }
    for (const low of ["4", "2", "0", "-1"]) {
      const problem = engineKeepAliveProblem(key, low) ?? "";
      assertStringIncludes(problem, "at least 5", `${key}=${low}`);
      assertStringIncludes(problem, "4 s");
    }
    for (const bad of ["soon", "5.5", ""]) {
      const problem = engineKeepAliveProblem(key, bad) ?? "";
      assertStringIncludes(problem, "whole number", `${key}=${bad}`);
      assertStringIncludes(problem, JSON.stringify(bad));
    }
  }
  // Other variables are the operator's.
  assertOk(engineKeepAliveProblem("VLLM_X", "1") === null);
});
