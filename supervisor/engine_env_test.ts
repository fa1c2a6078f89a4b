import { assertEquals } from "../tests/assert.ts";
import { engineBaseEnv } from "./engine_env.ts";

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
