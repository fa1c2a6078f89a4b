/**
 * `llmgw dev` end to end (issue #7's last point): the all-in-one cluster
 * starts, its samples load on the fake engine, and the official `openai`
 * client gets answers through its gateway. `devCommand` runs in-process and
 * is stopped through its stop signal in a `finally`, which stops every
 * engine it started.
 */
// The official client, for tests only (not a dependency of llmgw).
// deno-lint-ignore no-import-prefix
import OpenAI from "npm:openai@^5";
import { join } from "node:path";
import { assertEquals, assertOk } from "./assert.ts";
import { until } from "./until.ts";
import { devCommand } from "../cli/dev_command.ts";

Deno.test({
  name: "llmgw dev: the openai client gets a chat answer and a stream through the gateway",
  // The agents' engines are stopped by the dev command's own shutdown.
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "llmgw-dev-test-" });
    let stop!: () => void;
    const stopped = new Promise<void>((r) => stop = r);
    let output = "";
    const running = devCommand(
      ["--dir", dir, "--port", "0", "--load-seconds", "1", "--quiet"],
      (t) => output += t,
      stopped,
    );
    try {
      const describe = () => `output:\n${output}`;
      const gatewayUrl = await until(
        "dev.env with the gateway URL",
        async () =>
          /LLMGW_GATEWAY_URL=(\S+)/.exec(await Deno.readTextFile(join(dir, "dev.env")))?.[1],
        { timeoutMs: 60_000, intervalMs: 200, describe },
      );
      const client = new OpenAI({ baseURL: `${gatewayUrl}/v1`, apiKey: "unused", maxRetries: 0 });
      // The gateway lists only ready models: this waits for a llama-8b replica to load.
      await until(
        "llama-8b listed",
        async () => (await client.models.list()).data.some((m) => m.id === "llama-8b"),
        { timeoutMs: 60_000, intervalMs: 250, describe },
      );
      const answer = await client.chat.completions.create({
        model: "llama-8b",
        messages: [{ role: "user", content: "hello" }],
      });
      assertOk((answer.choices[0].message.content ?? "").length > 0);
      const stream = await client.chat.completions.create({
        model: "llama-8b",
        messages: [{ role: "user", content: "hello" }],
        stream: true,
      });
      let deltas = 0;
      for await (const chunk of stream) if (chunk.choices[0]?.delta?.content) deltas++;
      assertOk(deltas > 1, `several deltas, got ${deltas}`);
    } finally {
      stop();
      assertEquals(await running, 0);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
