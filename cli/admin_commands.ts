/**
 * The admin CLI (design §3, §13): `llmgw nodes`, `cordon|uncordon|drain`,
 * `apply -f`, `get deployments|replicas`, `scale`, `delete`, `explain`,
 * `events`. It talks to the control plane's admin API; the URL and token come
 * from `--url`/`--token` or `LLMGW_URL`/`LLMGW_TOKEN` (prefer the
 * environment: flags show in `ps`).
 *
 * @module
 */
import { readCaFile, TlsMaterialError } from "../tls/authority.ts";
import { pinnedFetch } from "../tls/trust.ts";
import { parse as parseYaml } from "yaml";
import { renderTable } from "../agent/inventory_table.ts";
import { explanationLines } from "../placement/place.ts";
import { controlUrlsOf, parseFlags, UsageError } from "./usage_error.ts";
import { FailoverFetch } from "../http/failover_fetch.ts";

/** Usage of the admin commands. */
export const ADMIN_USAGE =
  `Admin commands (control plane from --url/--token or LLMGW_URL/LLMGW_TOKEN;
  several control planes: URLs comma-separated, tried in order):
  nodes [--json]                       list nodes with state and GPUs
  cordon|uncordon|drain NODE           operator intent (survives re-registration)
  apply -f FILE                        create or update a deployment (YAML or JSON)
  get deployments|replicas [--json]    list them
  scale DEPLOYMENT N                   change the replica count
  delete DEPLOYMENT                    stop its replicas and free their GPUs
  explain DEPLOYMENT                   why its replicas are where they are, or pending
  events [--json] [--limit N]          recent events
  logs REPLICA [--shard N] [--lines N] a shard's recent log lines, from its agent
  apikeys create NAME [--models a,b]   a gateway API key (shown once); list; delete ID
  tokens create KIND [--ttl D] [--description T]
                                       an access token (shown once): admin, gateway
                                       (the endpoint feed only), metrics (GET /metrics
                                       only) or join; --ttl 30m|12h|7d|never (join: 24h)
  tokens list [KIND]                   tokens without their secrets
  tokens revoke ID                     stops working on its next request
The token may also come from a file: --token-file PATH or LLMGW_TOKEN_FILE
(the first start writes STORE/admin.token, or the state directory with a
postgres:// store).
`;

/** Raised when the control plane answers with an error; the message is its message. */
export class AdminError extends Error {
  /** Creates the error. */
  constructor(message: string) {
    super(message);
    this.name = "AdminError";
  }
}

interface Target {
  url: string;
  token: string;
  /** Trusts the cluster CA only (LLMGW_CA); absent: the system's roots. */
  fetch?: typeof fetch;
}

async function request(t: Target, method: string, path: string, body?: unknown): Promise<unknown> {
  let res: Response;
  try {
    res = await (t.fetch ?? fetch)(`${t.url.replace(/\/$/, "")}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${t.token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (e) {
    throw new AdminError(
      `cannot reach the control plane at ${t.url}: ${e instanceof Error ? e.message : e}`,
    );
  }
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON: reported below.
  }
  if (!res.ok) {
    const err = (json as { error?: { message?: string } } | null)?.error?.message;
    throw new AdminError(`${method} ${path}: ${res.status}: ${err ?? text.slice(0, 200)}`);
  }
  return json;
}

const FLAGS = {
  url: { type: "string" },
  token: { type: "string" },
  json: { type: "boolean" },
  file: { type: "string", short: "f" },
  limit: { type: "string" },
  shard: { type: "string" },
  lines: { type: "string" },
  models: { type: "string" },
  ttl: { type: "string" },
  description: { type: "string" },
  "token-file": { type: "string" },
} as const;

const TOKEN_KINDS = ["admin", "gateway", "metrics", "join"];

/**
 * A lifetime such as `30m`, `12h`, `7d` or `90s` in seconds; null for `never`.
 *
 * @throws {UsageError} For anything else.
 */
export function parseTtl(text: string): number | null {
  if (text === "never") return null;
  const m = /^(\d+)(s|m|h|d)$/.exec(text);
  const n = m === null ? 0 : Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as "s"];
  if (n <= 0) {
    throw new UsageError(
      `tokens: --ttl must be a positive duration such as 30m, 12h or 7d, or "never"; got "${text}"`,
    );
  }
  return n;
}

/** The admin verbs this module handles. */
export const ADMIN_VERBS: ReadonlySet<string> = new Set([
  "nodes",
  "cordon",
  "uncordon",
  "drain",
  "apply",
  "get",
  "scale",
  "delete",
  "explain",
  "events",
  "logs",
  "apikeys",
  "tokens",
]);

function readTokenFile(verb: string, path: string): string {
  try {
    return Deno.readTextFileSync(path).trim();
  } catch (e) {
    throw new UsageError(
      `${verb}: cannot read the token file ${path}: ${e instanceof Error ? e.message : e}`,
    );
  }
}

interface TokenRow {
  id: string;
  kind: string;
  description: string;
  created_at: number;
  expires_at: number | null;
}

/** `tokens create|list|revoke`. */
async function tokensCommand(
  t: Target,
  positionals: string[],
  values: { json?: boolean; ttl?: string; description?: string },
  out: (t: string) => void,
): Promise<number> {
  const [sub, arg] = positionals;
  const kindOf = (what: string | undefined, required: boolean): string | undefined => {
    if (what === undefined && !required) return undefined;
    if (what === undefined || !TOKEN_KINDS.includes(what)) {
      throw new UsageError(
        `tokens ${sub}: KIND must be one of ${TOKEN_KINDS.join(", ")}, got "${what ?? ""}"`,
      );
    }
    return what;
  };
  if (sub === "create") {
    const kind = kindOf(arg, true);
    const ttl = values.ttl === undefined ? undefined : parseTtl(values.ttl);
    const created = await request(t, "POST", "/v1/tokens", {
      kind,
      ...(values.description === undefined ? {} : { description: values.description }),
      ...(ttl === undefined ? {} : { ttl_seconds: ttl }),
    }) as TokenRow & { token: string };
    const expiry = created.expires_at === null
      ? "never expires"
      : `expires ${new Date(created.expires_at).toISOString()}`;
    out(
      values.json
        ? JSON.stringify(created, null, 2) + "\n"
        : `${kind} token ${created.id} (${expiry}; shown once, keep it):\n${created.token}\n`,
    );
    return 0;
  }
  if (sub === "list") {
    const kind = kindOf(arg, false);
    const { tokens } = await request(
      t,
      "GET",
      `/v1/tokens${kind === undefined ? "" : `?kind=${kind}`}`,
    ) as { tokens: TokenRow[] };
    out(
      values.json ? JSON.stringify(tokens, null, 2) + "\n" : renderTable(
        ["ID", "KIND", "EXPIRES", "DESCRIPTION"],
        tokens.map((k) => [
          k.id,
          k.kind,
          k.expires_at === null ? "never" : new Date(k.expires_at).toISOString(),
          cutAtWord(k.description, 60),
        ]),
      ) + "\n",
    );
    return 0;
  }
  if (sub === "revoke") {
    if (arg === undefined) {
      throw new UsageError("tokens revoke: ID is required (llmgw tokens list)");
    }
    const { revoked } = await request(t, "DELETE", `/v1/tokens/${encodeURIComponent(arg)}`) as {
      revoked: TokenRow;
    };
    out(
      values.json
        ? JSON.stringify(revoked, null, 2) + "\n"
        : `${revoked.kind} token ${revoked.id} revoked\n`,
    );
    return 0;
  }
  throw new UsageError(`tokens: expected create, list or revoke, got "${sub ?? ""}"`);
}

function parseAdmin(verb: string, args: string[]) {
  return parseFlags(verb, args, FLAGS);
}

type AdminValues = ReturnType<typeof parseAdmin>["values"];

/** Runs one admin verb; returns the exit code. */
export async function adminCommand(
  verb: string,
  args: string[],
  out: (t: string) => void,
): Promise<number> {
  const { values, positionals } = parseAdmin(verb, args);
  // Several URLs, comma-separated (issue #15): a request moves to the next on a failure.
  const urls = controlUrlsOf(verb, "--url", [
    values.url === undefined ? undefined : [values.url],
    Deno.env.get("LLMGW_URL") ? [Deno.env.get("LLMGW_URL")!] : undefined,
  ]);
  const url = urls[0];
  const tokenFile = values["token-file"] ?? (Deno.env.get("LLMGW_TOKEN_FILE") || undefined);
  const token = values.token ?? (Deno.env.get("LLMGW_TOKEN") || undefined) ??
    (tokenFile === undefined ? undefined : readTokenFile(verb, tokenFile));
  if (url === undefined) {
    throw new UsageError(`${verb}: no control plane: set LLMGW_URL or pass --url`);
  }
  if (token === undefined) {
    throw new UsageError(
      `${verb}: no admin token: set LLMGW_TOKEN or LLMGW_TOKEN_FILE, or pass --token-file`,
    );
  }
  const caFile = Deno.env.get("LLMGW_CA") || undefined;
  let trust: ReturnType<typeof pinnedFetch> | null = null;
  try {
    trust = caFile === undefined ? null : pinnedFetch(readCaFile(caFile));
  } catch (e) {
    if (e instanceof TlsMaterialError) throw new UsageError(`${verb}: LLMGW_CA: ${e.message}`);
    throw e;
  }
  try {
    // A command that only reads moves past a silent control plane after 5 s.
    const failover = new FailoverFetch(urls, trust?.fetch ?? fetch, () => {}, {
      readAttemptTimeoutMs: 5_000,
    });
    return await run(verb, { url, token, fetch: failover.fetch }, positionals, values, out);
  } finally {
    trust?.close();
  }
}

async function run(
  verb: string,
  t: Target,
  positionals: string[],
  values: AdminValues,
  out: (t: string) => void,
): Promise<number> {
  const arg = (i: number, what: string) => {
    const v = positionals[i];
    if (v === undefined) throw new UsageError(`${verb}: ${what} is required`);
    return v;
  };
  const print = (json: unknown, table: () => string) =>
    out(values.json ? JSON.stringify(json, null, 2) + "\n" : table() + "\n");
  switch (verb) {
    case "nodes": {
      const { nodes } = await request(t, "GET", "/v1/nodes") as { nodes: NodeRow[] };
      print(nodes, () =>
        renderTable(
          ["NODE", "STATE", "GPUS", "FREE", "CLASSES", "FABRICS", "ADDRESS"],
          nodes.map((n) => [
            n.id,
            n.state,
            String(n.gpus.length),
            String(
              n.gpus.filter((g) => g.health.problems.length === 0).length -
                n.allocations.reduce((s, a) => s + a.gpu_indices.length, 0),
            ),
            [...new Set(n.gpus.map((g) => g.class ?? "?"))].join(","),
            n.fabrics.map((f) => f.fabric).join(",") || "-",
            n.mgmt_addr,
          ]),
        ));
      return 0;
    }
    case "cordon":
    case "uncordon":
    case "drain": {
      const node = arg(0, "NODE");
      const n = await request(
        t,
        "POST",
        `/v1/nodes/${encodeURIComponent(node)}/${verb}`,
      ) as NodeRow;
      out(`node ${n.id}: ${n.state}\n`);
      return 0;
    }
    case "apply": {
      if (values.file === undefined) throw new UsageError("apply: -f FILE is required");
      let text: string;
      try {
        text = await Deno.readTextFile(values.file);
      } catch {
        throw new UsageError(`apply: cannot read ${values.file}`);
      }
      let doc: unknown;
      try {
        doc = values.file.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
      } catch (e) {
        throw new UsageError(
          `apply: ${values.file} is not valid YAML or JSON: ${
            e instanceof Error ? e.message.split("\n")[0] : e
          }`,
        );
      }
      const r = await request(t, "POST", "/v1/deployments", doc) as {
        deployment: { name: string; replicas: number };
        created: boolean;
        warnings: { message: string }[];
      };
      for (const w of r.warnings) out(`warning: ${w.message}\n`);
      out(
        `deployment ${r.deployment.name} ${
          r.created ? "created" : "updated"
        } (${r.deployment.replicas} replicas)\n`,
      );
      return 0;
    }
    case "get": {
      const what = arg(0, "deployments or replicas");
      if (what === "deployments") {
        const { deployments } = await request(t, "GET", "/v1/deployments") as {
          deployments: {
            name: string;
            spec: { model: string; served_model_name: string; replicas: number };
          }[];
        };
        print(deployments, () =>
          renderTable(
            ["DEPLOYMENT", "MODEL", "SERVED AS", "REPLICAS"],
            deployments.map((
              d,
            ) => [d.name, d.spec.model, d.spec.served_model_name, String(d.spec.replicas)]),
          ));
        return 0;
      }
      if (what === "replicas") {
        const { replicas } = await request(t, "GET", "/v1/replicas") as { replicas: ReplicaRow[] };
        print(replicas, () => replicaTable(replicas));
        return 0;
      }
      throw new UsageError(`get: expected deployments or replicas, got "${what}"`);
    }
    case "scale": {
      const name = arg(0, "DEPLOYMENT");
      const n = arg(1, "N");
      if (!/^\d+$/.test(n)) throw new UsageError(`scale: N must be a whole number, got "${n}"`);
      await request(t, "POST", `/v1/deployments/${encodeURIComponent(name)}/scale`, {
        replicas: Number(n),
      });
      out(`deployment ${name} scaled to ${n}\n`);
      return 0;
    }
    case "delete": {
      const name = arg(0, "DEPLOYMENT");
      await request(t, "DELETE", `/v1/deployments/${encodeURIComponent(name)}`);
      out(`deployment ${name} deleted\n`);
      return 0;
    }
    case "explain": {
      const name = arg(0, "DEPLOYMENT");
      const { replicas } = await request(t, "GET", "/v1/replicas") as { replicas: ReplicaRow[] };
      const mine = replicas.filter((r) => r.deployment === name);
      if (mine.length === 0) {
        throw new AdminError(`deployment ${name} has no replicas (does it exist?)`);
      }
      print(
        mine,
        () =>
          mine.map((r) =>
            [
              `replica ${r.id}: ${r.state}${r.profile ? ` (profile ${r.profile})` : ""}`,
              ...failureLines(r),
              ...(r.explanation ? explanationLines(r.explanation).map((l) => `  ${l}`) : []),
            ]
              .join("\n")
          ).join("\n\n"),
      );
      return 0;
    }
    case "logs": {
      const replica = arg(0, "REPLICA");
      const shard = values.shard ?? "0";
      const lines = values.lines ?? "100";
      if (!/^\d+$/.test(shard) || !/^\d+$/.test(lines)) {
        throw new UsageError("logs: --shard and --lines must be whole numbers");
      }
      const r = await request(
        t,
        "GET",
        `/v1/replicas/${encodeURIComponent(replica)}/logs?shard=${shard}&lines=${lines}`,
      ) as {
        shard_id: string;
        node: string;
        state: string;
        lines: string[];
      };
      if (values.json) out(JSON.stringify(r, null, 2) + "\n");
      else out(`# shard ${r.shard_id} on ${r.node} (${r.state})\n${r.lines.join("\n")}\n`);
      return 0;
    }
    case "apikeys": {
      const sub = arg(0, "create, list or delete");
      if (sub === "create") {
        const name = arg(1, "NAME");
        const models = values.models === undefined
          ? null
          : values.models.split(",").map((m) => m.trim()).filter((m) => m !== "");
        const k = await request(t, "POST", "/v1/apikeys", { name, models }) as {
          id: string;
          key: string;
        };
        out(
          values.json
            ? JSON.stringify(k, null, 2) + "\n"
            : `API key ${k.id} (shown once, keep it): ${k.key}\n`,
        );
        return 0;
      }
      if (sub === "list") {
        const { api_keys } = await request(t, "GET", "/v1/apikeys") as {
          api_keys: { id: string; name: string; models: string[] | null; created_at: number }[];
        };
        print(api_keys, () =>
          renderTable(
            ["ID", "NAME", "MODELS", "CREATED"],
            api_keys.map((
              k,
            ) => [
              k.id,
              k.name,
              k.models === null ? "all" : k.models.join(","),
              new Date(k.created_at).toISOString(),
            ]),
          ));
        return 0;
      }
      if (sub === "delete") {
        const id = arg(1, "ID");
        await request(t, "DELETE", `/v1/apikeys/${encodeURIComponent(id)}`);
        out(`API key ${id} deleted\n`);
        return 0;
      }
      throw new UsageError(`apikeys: expected create, list or delete, got "${sub}"`);
    }
    case "tokens":
      return await tokensCommand(t, positionals, values, out);
    case "events": {
      const limit = values.limit ?? "50";
      if (!/^\d+$/.test(limit)) {
        throw new UsageError(`events: --limit must be a whole number, got "${limit}"`);
      }
      const { events } = await request(t, "GET", `/v1/events?limit=${limit}`) as {
        events: { at: number; kind: string; subject: string; message: string }[];
      };
      print(events, () =>
        renderTable(
          ["TIME", "KIND", "SUBJECT", "MESSAGE"],
          events.map((e) => [new Date(e.at).toISOString(), e.kind, e.subject, e.message]),
        ));
      return 0;
    }
  }
  throw new UsageError(`unknown admin command "${verb}"`);
}

interface NodeRow {
  id: string;
  state: string;
  mgmt_addr: string;
  gpus: { class: string | null; health: { problems: string[] } }[];
  fabrics: { fabric: string }[];
  allocations: { gpu_indices: number[] }[];
}

interface ReplicaRow {
  id: string;
  deployment: string;
  state: string;
  profile: string | null;
  shards: {
    rank: number;
    node: string;
    gpu_indices: number[];
    state: string;
    progress: { percent: number | null } | null;
    last_failure?: { reason: string; log_tail: string[] } | null;
  }[];
  explanation: Parameters<typeof explanationLines>[0] | null;
  failure?: { reason: string; log_tail: string[]; attempts: number } | null;
}

/** Cuts text to at most `max` characters at a word boundary, marking the cut. */
export function cutAtWord(text: string, max: number): string {
  const line = text.split("\n")[0];
  if (line.length <= max && line === text) return text;
  if (line.length <= max) return `${line} …`;
  const cut = line.slice(0, max - 1);
  const space = cut.lastIndexOf(" ");
  return `${space > max / 2 ? cut.slice(0, space) : cut}…`;
}

/** What explain says of a replica's failures: the given-up reason or each shard's last one. */
export function failureLines(
  r: ReplicaRow & {
    shards: { rank: number; last_failure?: { reason: string; log_tail: string[] } | null }[];
  },
): string[] {
  const out: string[] = [];
  const tail = (lines: readonly string[]) =>
    lines.length === 0 ? [] : ["    log tail:", ...lines.slice(-20).map((l) => `      ${l}`)];
  if (r.failure) {
    out.push(
      r.state === "failed"
        ? `  failed after ${r.failure.attempts} placement(s), not retried until the deployment changes:`
        : `  refused for a reason retrying cannot change (placement ${r.failure.attempts} of at most 3); placing it again:`,
      `    ${r.failure.reason}`,
      ...tail(r.failure.log_tail),
    );
  }
  for (const s of r.shards) {
    if (!s.last_failure) continue;
    out.push(
      `  rank ${s.rank} last failure: ${s.last_failure.reason}`,
      ...tail(s.last_failure.log_tail),
    );
  }
  return out;
}

/** Replicas as a table: one line per shard. */
export function replicaTable(replicas: readonly ReplicaRow[]): string {
  return renderTable(
    ["REPLICA", "STATE", "PROFILE", "RANK", "NODE", "GPUS", "SHARD", "PROGRESS"],
    replicas.flatMap((r) =>
      r.shards.length === 0
        ? [[
          r.id,
          r.state,
          r.profile ?? "-",
          "-",
          "-",
          "-",
          "-",
          cutAtWord(
            (r.state === "failed" ? r.failure?.reason : undefined) ?? r.explanation?.summary ?? "-",
            80,
          ),
        ]]
        : r.shards.map((s) => [
          r.id,
          r.state,
          r.profile ?? "-",
          String(s.rank),
          s.node,
          s.gpu_indices.join(","),
          s.state,
          s.progress?.percent === null || s.progress === null ? "-" : `${s.progress.percent}%`,
        ])
    ),
  );
}
