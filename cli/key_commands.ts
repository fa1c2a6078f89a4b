/**
 * `llmgw tokens` and `llmgw apikeys`: access tokens and gateway API keys,
 * each secret shown once at creation and never again.
 *
 * @module
 */
import {
  ApiKeyListSchema,
  DeletedAnswer,
  NewApiKeyAnswer,
  NewTokenAnswer,
  RevokedTokenAnswer,
  TokenListSchema,
} from "../protocol/admin_protocol.ts";
import { adminAnswer, type AdminCall } from "./admin_client.ts";
import { cutAtWord, renderTable } from "../text/table.ts";
import { durationMs } from "./duration.ts";
import { refuseExtra } from "./names.ts";
import { UsageError } from "./usage_error.ts";

const TOKEN_KINDS = ["admin", "gateway", "metrics", "join"];

/**
 * A lifetime such as `30m`, `12h`, `7d` or `90s` in seconds; null for `never`.
 *
 * @throws {UsageError} For anything else.
 */
export function parseTtl(text: string): number | null {
  if (text === "never") return null;
  const ms = durationMs(text);
  const n = ms === null || ms % 1_000 !== 0 ? 0 : ms / 1_000;
  if (n <= 0) {
    throw new UsageError(
      `tokens: --ttl must be a positive duration such as 30m, 12h or 7d, or "never"; got "${text}"`,
    );
  }
  return n;
}

/** `llmgw tokens create|list|revoke`. */
export async function tokensCommand(
  call: AdminCall,
  positionals: string[],
  values: { json?: boolean; ttl?: string; description?: string },
  out: (t: string) => void,
): Promise<number> {
  const [sub, arg] = positionals;
  const takes: Record<string, string[]> = {
    create: ["one KIND"],
    list: ["one KIND"],
    revoke: ["one ID"],
  };
  if (takes[sub] !== undefined) refuseExtra(`tokens ${sub}`, positionals.slice(1), takes[sub]);
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
    const created = await adminAnswer(call, NewTokenAnswer, "POST", "/v1/tokens", {
      kind,
      ...(values.description === undefined ? {} : { description: values.description }),
      ...(ttl === undefined ? {} : { ttl_seconds: ttl }),
    });
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
    const { tokens } = await adminAnswer(
      call,
      TokenListSchema,
      "GET",
      `/v1/tokens${kind === undefined ? "" : `?kind=${kind}`}`,
    );
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
      throw new UsageError("tokens revoke: ID is required (llmgw tokens list)", "tokens");
    }
    const { revoked } = await adminAnswer(
      call,
      RevokedTokenAnswer,
      "DELETE",
      `/v1/tokens/${encodeURIComponent(arg)}`,
    );
    out(
      values.json
        ? JSON.stringify(revoked, null, 2) + "\n"
        : `${revoked.kind} token ${revoked.id} revoked\n`,
    );
    return 0;
  }
  throw new UsageError(`tokens: expected create, list or revoke, got "${sub ?? ""}"`, "tokens");
}

/** `llmgw apikeys create|list|delete`. */
export async function apiKeysCommand(
  call: AdminCall,
  positionals: string[],
  values: { json?: boolean; models?: string },
  out: (t: string) => void,
): Promise<number> {
  const [sub, name] = positionals;
  const takes: Record<string, string[]> = { create: ["one NAME"], list: [], delete: ["one ID"] };
  if (takes[sub] !== undefined) refuseExtra(`apikeys ${sub}`, positionals.slice(1), takes[sub]);
  const print = (json: unknown, table: () => string) =>
    out(values.json ? JSON.stringify(json, null, 2) + "\n" : table() + "\n");
  if (sub === "create") {
    if (name === undefined) throw new UsageError("apikeys create: NAME is required", "apikeys");
    const models = values.models === undefined
      ? null
      : values.models.split(",").map((m) => m.trim()).filter((m) => m !== "");
    const k = await adminAnswer(call, NewApiKeyAnswer, "POST", "/v1/apikeys", { name, models });
    out(
      values.json
        ? JSON.stringify(k, null, 2) + "\n"
        : `API key ${k.id} (shown once, keep it): ${k.key}\n`,
    );
    return 0;
  }
  if (sub === "list") {
    const { api_keys } = await adminAnswer(call, ApiKeyListSchema, "GET", "/v1/apikeys");
    print(api_keys, () =>
      renderTable(
        ["ID", "NAME", "MODELS", "CREATED"],
        api_keys.map((k) => [
          k.id,
          k.name,
          k.models === null ? "all" : k.models.join(","),
          new Date(k.created_at).toISOString(),
        ]),
      ));
    return 0;
  }
  if (sub === "delete") {
    if (name === undefined) throw new UsageError("apikeys delete: ID is required", "apikeys");
    const path = `/v1/apikeys/${encodeURIComponent(name)}`;
    const r = await adminAnswer(call, DeletedAnswer, "DELETE", path);
    out(values.json ? JSON.stringify(r, null, 2) + "\n" : `API key ${name} deleted\n`);
    return 0;
  }
  throw new UsageError(`apikeys: expected create, list or delete, got "${sub ?? ""}"`, "apikeys");
}
