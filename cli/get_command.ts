/**
 * `llmgw get nodes|deployments|replicas|events|models [NAME…]`: a kind listed, or
 * the objects named (several names as kubectl takes them, docs/cli.md), as
 * a table, JSON or YAML. Deployments in JSON or YAML are their specs as
 * `apply -f` takes them back, so `get deployments NAME -o yaml > f.yaml`
 * and `apply -f f.yaml` round-trip.
 *
 * @module
 */
import {
  type DeploymentListing,
  DeploymentListSchema,
  EventListSchema,
  NodeListSchema,
  NodeSchema,
  ReplicaListSchema,
  StoredDeploymentSchema,
} from "../protocol/admin_protocol.ts";
import { adminAnswer, type AdminCall } from "./admin_client.ts";
import { deploymentTable, eventTable, nodeTable, replicaTable } from "./admin_views.ts";
import { eachName, type EachResult, exitCode, oneOrMany, refuseExtra } from "./names.ts";
import { dataText, documentsText, isData, type OutputFormat } from "./output_format.ts";
import { AdminError } from "./admin_client.ts";
import { ModelListSchema } from "../protocol/model_admin.ts";
import { modelTable } from "./model_view.ts";

/** The kinds `get` lists. */
export const GET_KINDS: readonly string[] = [
  "nodes",
  "deployments",
  "replicas",
  "events",
  "models",
];

/** What `get` needs besides the call. */
export interface GetOptions {
  /** How to print. */
  format: OutputFormat;
  /** Events: the last N (default 50). */
  limit?: string;
  /** Events of one subject: this incarnation's instead of the current one's (control/identity.ts). */
  incarnation?: string;
  /** Standard output. */
  out: (text: string) => void;
  /** Standard error: one line per name that failed. */
  err: (text: string) => void;
}

/**
 * Runs `get KIND [NAME…]` (`events` takes one subject at most); returns the exit code.
 *
 * @throws {UsageError} For a second subject of `get events`.
 */
export async function getCommand(
  call: AdminCall,
  kind: string,
  names: readonly string[],
  o: GetOptions,
): Promise<number> {
  const wide = o.format === "wide";
  const print = (r: EachResult<unknown>, value: unknown, table: () => string) => {
    if (isData(o.format)) o.out(dataText(o.format, value));
    else if (names.length === 0 || r.results.length > 0) o.out(table().replace(/\n?$/, "\n"));
    return exitCode(r);
  };
  switch (kind) {
    case "nodes": {
      if (names.length === 0) {
        const { nodes } = await adminAnswer(call, NodeListSchema, "GET", "/v1/nodes");
        return print({ results: nodes, failed: 0 }, nodes, () => nodeTable(nodes, wide));
      }
      const r = await eachName(
        names,
        (n) => adminAnswer(call, NodeSchema, "GET", `/v1/nodes/${encodeURIComponent(n)}`),
        o.err,
      );
      return print(r, oneOrMany(names, r.results), () => nodeTable(r.results, wide));
    }
    case "deployments": {
      const r: EachResult<DeploymentListing> = names.length === 0
        ? {
          results: (await adminAnswer(call, DeploymentListSchema, "GET", "/v1/deployments"))
            .deployments,
          failed: 0,
        }
        : await eachName(
          names,
          (n) =>
            adminAnswer(
              call,
              StoredDeploymentSchema,
              "GET",
              `/v1/deployments/${encodeURIComponent(n)}`,
            ),
          o.err,
        );
      if (isData(o.format)) {
        // The specs, as apply -f takes them back.
        o.out(documentsText(o.format, r.results.map((d) => d.spec), names.length === 1));
        return exitCode(r);
      }
      if (r.results.length === 0 && names.length > 0) return exitCode(r);
      const { replicas } = await adminAnswer(call, ReplicaListSchema, "GET", "/v1/replicas");
      return print(r, null, () => deploymentTable(r.results, replicas, wide));
    }
    case "models": {
      const { models } = await adminAnswer(call, ModelListSchema, "GET", "/v1/models");
      if (names.length === 0) {
        return print({ results: models, failed: 0 }, models, () => modelTable(models, wide));
      }
      const r = await eachName(names, (n) => {
        const chosen = models.filter((m) => m.model === n);
        if (chosen.length > 0) return Promise.resolve(chosen);
        return Promise.reject(
          new AdminError(
            `get models: no model ${n} (no deployment uses it, no agent holds it)`,
            404,
          ),
        );
      }, o.err);
      const chosen = r.results.flat();
      return print(r, chosen, () => modelTable(chosen, wide));
    }
    case "replicas": {
      const { replicas } = await adminAnswer(call, ReplicaListSchema, "GET", "/v1/replicas");
      if (names.length === 0) {
        return print(
          { results: replicas, failed: 0 },
          replicas,
          () => replicaTable(replicas, wide),
        );
      }
      const r = await eachName(names, (n) => {
        const chosen = replicas.filter((x) => x.id === n || x.deployment === n);
        if (chosen.length > 0) return Promise.resolve(chosen);
        return Promise.reject(
          new AdminError(`get replicas: no replica or deployment named ${n}`, 404),
        );
      }, o.err);
      // A replica named twice (by itself and its deployment) is listed once.
      const seen = new Set<string>();
      const chosen = r.results.flat().filter((x) => !seen.has(x.id) && seen.add(x.id));
      return print(r, chosen, () => replicaTable(chosen, wide));
    }
    default: {
      // Checked before, with the other usage (cli/admin_commands.ts); kept for direct callers.
      refuseExtra("get events", names, ["one SUBJECT (node/ID, deployment/NAME, replica/ID)"]);
      const [name] = names;
      const subject = name === undefined ? "" : `&subject=${encodeURIComponent(name)}`;
      // Of one subject, its current incarnation unless asked (control/identity.ts).
      const incarnation = o.incarnation === undefined
        ? ""
        : `&incarnation=${encodeURIComponent(o.incarnation)}`;
      const { events } = await adminAnswer(
        call,
        EventListSchema,
        "GET",
        `/v1/events?limit=${o.limit ?? "50"}${subject}${incarnation}`,
      );
      return print(
        { results: events, failed: 0 },
        events,
        () => eventTable(events, wide ? 200 : 80, wide),
      );
    }
  }
}
