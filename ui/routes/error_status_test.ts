import { assertEquals } from "../../tests/assert.ts";
import {
  AgentUnavailableError,
  ConflictError,
  ControlError,
  ForbiddenError,
  InvalidInputError,
  NotFoundError,
  NotSettledError,
} from "../../control/errors.ts";
import { NotLeaderError, StoreError } from "../../control/store/store.ts";
import { FleetQueryError } from "../fleet_model.ts";
import { errorStatus } from "./error_status.ts";

Deno.test("errorStatus: each domain error's status, null for anything else", () => {
  const cases: [string, unknown, number | null][] = [
    ["fleet query", new FleetQueryError("Cannot filter: state is bogus"), 400],
    [
      "invalid input",
      new InvalidInputError("scale", [{ path: ["replicas"], message: "bad" }]),
      400,
    ],
    ["forbidden", new ForbiddenError("forbidden", "not yours"), 403],
    ["not found", new NotFoundError("no replica r1"), 404],
    ["conflict", new ConflictError("already draining"), 409],
    ["agent unavailable", new AgentUnavailableError("agent_unreachable", "no answer"), 502],
    ["not settled", new NotSettledError("the ready set is settling"), 503],
    ["another control error", new ControlError("odd", "something else"), 400],
    ["store", new StoreError("the store is down"), 503],
    ["not leader (a store error)", new NotLeaderError("another instance leads"), 503],
    ["a bug", new TypeError("x is undefined"), null],
    ["not an error", "boom", null],
  ];
  for (const [name, e, want] of cases) assertEquals(errorStatus(e), want, name);
});
