import { assertEquals } from "../tests/assert.ts";
import { engineBaseEnv, engineEnv } from "./engine_env.ts";

Deno.test("an engine's environment: the agent's, without llmgw's settings or the hub's credentials", () => {
  const agent = {
    PATH: "/usr/bin",
    HOME: "/root",
    LLMGW_JOIN_TOKEN: "join",
    HF_TOKEN: "hf_secret",
    HUGGING_FACE_HUB_TOKEN: "hf_old",
    HF_TOKEN_PATH: "/etc/llmgw/hf_token",
    HF_ENDPOINT: "http://mirror.lan",
  };
  assertEquals(engineBaseEnv(agent), {
    PATH: "/usr/bin",
    HOME: "/root",
    HF_ENDPOINT: "http://mirror.lan",
  });
  assertEquals(agent.HF_TOKEN, "hf_secret", "the agent's own is untouched");
});

Deno.test("an engine's whole environment has no hub credential, even one a stored profile's env still sets", () => {
  const env = engineEnv(
    { PATH: "/usr/bin", HF_TOKEN: "hf_agent" },
    { NCCL_DEBUG: "WARN" },
    { HF_TOKEN: "hf_from_an_old_profile", HUGGING_FACE_HUB_TOKEN: "hf_old", VLLM_X: "1" },
  );
  assertEquals(env, { PATH: "/usr/bin", NCCL_DEBUG: "WARN", VLLM_X: "1" });
});
