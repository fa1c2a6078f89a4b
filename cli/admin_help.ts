/**
 * The admin commands' help: one text per command, printed by
 * `llmgw CMD --help` and `llmgw help CMD`, and the summary in `llmgw help`.
 *
 * @module
 */

const CONNECTION = `Connection (every admin command):
  --url URL[,URL…]   control plane(s), tried in order (or LLMGW_URL)
  --token-file PATH  admin token from a file (or LLMGW_TOKEN_FILE, LLMGW_TOKEN;
                     --token T works too, but shows in ps)
  LLMGW_CA           the cluster CA certificate to trust
  --json             print JSON instead of a table (mutations: the object changed)
  -h, --help         this help`;

/** Help text of each admin command, without the connection block. */
const TEXTS: Readonly<Record<string, string>> = {
  get: `Usage: llmgw get nodes|deployments|replicas|events [NAME] [-o wide|json] [--limit N]

Lists a kind of object, or one object by NAME. Deployments show READY as
ready replicas / desired; replicas one line per shard; events one line each
(long messages cut at a word; the whole text is in describe and --json).
Events of one subject (get events deployment/NAME) are those of the object
that has the name now, not of an earlier one deleted under it.
  -o wide        more columns; -o json is --json
  --limit N      events: the last N (default 50)
  --incarnation all|UID
                 events of a subject: every object that had the name, or one
                 (its UID from -o wide or --json)`,
  nodes: `Usage: llmgw nodes [-o wide] [--json]

Lists nodes with state and GPUs (the same as llmgw get nodes).`,
  describe: `Usage: llmgw describe node|deployment|replica NAME [--json]

Everything about one object: state, placement, the explanation on the live
inventory (what llmgw plan would say now), last failure with its log tail,
and recent events.`,
  explain: `Usage: llmgw explain DEPLOYMENT|REPLICA [--json]

Why each replica is where it is, or why it is pending: its state, its last
failure with the log tail, and the placement explanation on the live
inventory, every rejected node by name on a small fleet and grouped by
reason on a large one.`,
  logs: `Usage: llmgw logs REPLICA [-f] [--shard N] [--lines N] [--json]

A shard's recent log lines, fetched from its agent.
  -f, --follow   keep printing new lines until Ctrl-C
  --shard N      the shard's rank (default 0)
  --lines N      how many lines from the end (default 100)`,
  apply: `Usage: llmgw apply -f FILE|DIR|- [-f …] [--json]

Creates or updates deployments from YAML or JSON: a file, every .yaml, .yml
and .json file in a directory (in name order), or standard input (-).
A YAML file may hold several documents separated by ---.
  -f, --file     where to read (repeatable)`,
  scale: `Usage: llmgw scale DEPLOYMENT N [--json]

Changes the replica count. Nothing else restarts.`,
  delete: `Usage: llmgw delete DEPLOYMENT [--json]

Stops its replicas and frees their GPUs.`,
  cordon: `Usage: llmgw cordon NODE [--json]

No new replicas are placed on NODE; what runs there stays. Survives the
node's re-registration.`,
  uncordon: `Usage: llmgw uncordon NODE [--json]

NODE takes new replicas again.`,
  drain: `Usage: llmgw drain NODE [--json]

Moves NODE's replicas elsewhere (replacements start first when capacity
allows), then says node_drained.`,
  events: `Usage: llmgw events [--limit N] [--incarnation UID] [--json]

Recent events, one line each (the same as llmgw get events).
  --limit N      the last N (default 50)
  --incarnation UID
                 only those about one object (its UID from get events -o wide)`,
  apikeys: `Usage: llmgw apikeys create NAME [--models a,b] | list | delete ID

Gateway API keys. A new key is shown once.
  --models a,b   the served models it may call (default: all)`,
  tokens: `Usage: llmgw tokens create KIND [--ttl D] [--description T] | list [KIND] | revoke ID

Access tokens, shown once: admin, gateway (the endpoint feed only), metrics
(GET /metrics only) or join.
  --ttl D          30m, 12h, 7d or never (join tokens default to 24h)
  --description T  what it is for`,
};

/** The admin commands that have help, in the order `llmgw help` lists them. */
export const ADMIN_HELP_TOPICS: readonly string[] = Object.keys(TEXTS);

/** The help of one admin command, or null when there is none. */
export function adminHelp(verb: string, extra: Record<string, string> = {}): string | null {
  const text = (extra[verb] ?? TEXTS[verb])?.trimEnd();
  return text === undefined ? null : `${text}\n\n${CONNECTION}\n`;
}

/** Usage of the admin commands, for `llmgw help`. */
export const ADMIN_USAGE =
  `Admin commands (control plane from --url or LLMGW_URL, token from LLMGW_TOKEN[_FILE]):
  get nodes|deployments|replicas|events [NAME] [-o wide]
                                       list them (READY for deployments)
  describe node|deployment|replica NAME
                                       state, placement, live explanation, failures, events
  explain DEPLOYMENT|REPLICA           why its replicas are where they are, or pending
  logs REPLICA [-f]                    a shard's log lines, from its agent; -f follows
  apply -f FILE|DIR|-                  create or update deployments (YAML or JSON)
  scale DEPLOYMENT N                   change the replica count
  delete DEPLOYMENT                    stop its replicas and free their GPUs
  rollout status|history|undo DEPLOYMENT
                                       follow, list or undo a deployment's rolling update
  cordon|uncordon|drain NODE           operator intent (survives re-registration)
  nodes, events                        short for get nodes, get events
  apikeys create|list|delete           gateway API keys
  tokens create|list|revoke            access tokens (admin, gateway, metrics, join)
Every command takes --json and --help.
`;
