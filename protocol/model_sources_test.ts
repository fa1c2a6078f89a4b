/**
 * `model_sources` on the wire (issue #25 item 3): optional, checked field by
 * field when present, and dropped by a parser that does not know it (an
 * older agent's), as unknown fields are.
 */
import { assertEquals, assertStringIncludes, assertThrows } from "../tests/assert.ts";
import { parseDesiredState } from "./agent_protocol.ts";
import { WireFormatError } from "./wire_error.ts";
import { ModelSourcesSchema } from "./model_sources.ts";

const SOURCES = [{
  model: "acme/tiny-llm",
  commit: "4b1c2a9d0e7f3b5a6c8d9e0f1a2b3c4d5e6f7a8b",
  peers: [{ node_id: "n1", url: "https://n1.lab:7400" }],
  origin: true,
}];

Deno.test("model_sources: optional in the desired state, kept when present", () => {
  assertEquals(parseDesiredState({ generation: 3, shards: [] }), { generation: 3, shards: [] });
  assertEquals(parseDesiredState({ generation: 3, shards: [], model_sources: SOURCES }), {
    generation: 3,
    shards: [],
    model_sources: SOURCES,
  });
});

Deno.test("model_sources: a bad entry is refused naming its path", () => {
  const bad = [{ ...SOURCES[0], commit: "main" }];
  const e = assertThrows(
    () => parseDesiredState({ generation: 3, shards: [], model_sources: bad }),
    WireFormatError,
  );
  assertStringIncludes(e.message, "model_sources[0].commit");
  assertStringIncludes(e.message, "40-hex commit");
  const noUrl = [{ ...SOURCES[0], peers: [{ node_id: "n1", url: "no url here" }] }];
  assertEquals(ModelSourcesSchema.safeParse(noUrl[0]).success, false);
});
