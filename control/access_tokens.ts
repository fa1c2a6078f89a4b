/**
 * Access tokens with least privilege (design §11.2): admin, gateway (the
 * endpoint feed and nothing else), metrics (`GET /metrics` only) and join.
 * A token is `llmgw1.<id>.<secret>`; only its SHA-256 is stored, the id finds
 * the record without comparing against every hash, and the secret is shown
 * once. A join token may carry the CA's public-key hash as a fourth part
 * (`llmgw1.<id>.<secret>.<ca-hash>`): that part is for the agent to check
 * the server before it sends the token, and takes no part in the match.
 *
 * Tokens from the environment (operator-set, `LLMGW_ADMIN_TOKEN` and
 * `LLMGW_JOIN_TOKEN`) are matched by the API's authorizer (api/auth.ts),
 * not here: they are not listed and cannot be revoked through the API.
 *
 * @module
 */
import { randomSecret } from "../http/secret_file.ts";
import { tokenParts } from "../protocol/token_format.ts";
import { ConflictError, InvalidInputError, NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";
import type { AccessTokenKind, AccessTokenRecord } from "./store/store.ts";
import { hashToken, tokenMatches } from "../http/tokens.ts";

export type { AccessTokenKind, AccessTokenRecord };
export { tokenParts };

/** Every kind, in the order listings show them. */
export const ACCESS_TOKEN_KINDS: readonly AccessTokenKind[] = [
  "admin",
  "gateway",
  "metrics",
  "join",
];

/** How long a join token lasts unless the creator says otherwise: a day, as kubeadm's. */
export const DEFAULT_JOIN_TTL_MS = 24 * 3600_000;

/** A token as listed: never its secret or its hash. */
export interface AccessTokenListing {
  /** Token id. */
  id: string;
  /** What it may do. */
  kind: AccessTokenKind;
  /** A note for people. */
  description: string;
  /** When it was created (ms since epoch). */
  created_at: number;
  /** When it stops working (ms since epoch); null: never. */
  expires_at: number | null;
}

/** A created token: the listing and, this once, the token itself. */
export interface CreatedAccessToken extends AccessTokenListing {
  /** The token; shown once, never stored. */
  token: string;
}

/** What {@link AccessTokenService.create} takes. */
export interface CreateAccessToken {
  /** What it may do. */
  kind: AccessTokenKind;
  /** A note for people. */
  description?: string;
  /** Lifetime in ms; null: never expires. Default: a day for join tokens, never for others. */
  ttl_ms?: number | null;
}

function randomId(): string {
  return [...crypto.getRandomValues(new Uint8Array(6))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
}

function listing(t: AccessTokenRecord): AccessTokenListing {
  const { id, kind, description, created_at, expires_at } = t;
  return { id, kind, description, created_at, expires_at };
}

/** The access token service. */
export class AccessTokenService {
  readonly #state: ControlState;

  /** Creates the service. */
  constructor(state: ControlState) {
    this.#state = state;
  }

  /**
   * Creates a token; the token is in the answer once, only its hash is stored.
   *
   * @throws {InvalidInputError} For a negative or absurd lifetime.
   */
  create(o: CreateAccessToken): Promise<CreatedAccessToken> {
    const state = this.#state;
    const ttl = o.ttl_ms === undefined
      ? (o.kind === "join" ? DEFAULT_JOIN_TTL_MS : null)
      : o.ttl_ms;
    if (ttl !== null && (!Number.isInteger(ttl) || ttl <= 0)) {
      throw new InvalidInputError("Cannot create token", [
        { path: ["ttl_ms"], message: "must be a positive whole number of ms, or null" },
      ]);
    }
    return state.locked(async () => {
      const id = randomId();
      if (state.tokens.has(id)) throw new ConflictError(`token id ${id} exists; try again`);
      const token = `llmgw1.${id}.${randomSecret()}`;
      const now = state.now();
      const record: AccessTokenRecord = {
        id,
        kind: o.kind,
        hash: await hashToken(token),
        description: o.description ?? "",
        created_at: now,
        expires_at: ttl === null ? null : now + ttl,
      };
      await state.store.putToken(record);
      state.tokens.set(id, record);
      await state.event("token_created", `token/${id}`, `${o.kind} token created`);
      return { ...listing(record), token };
    });
  }

  /** The stored tokens (expired ones too, marked by `expires_at`), optionally of one kind. */
  list(kind?: AccessTokenKind): AccessTokenListing[] {
    return [...this.#state.tokens.values()]
      .filter((t) => kind === undefined || t.kind === kind)
      .map(listing);
  }

  /** Revokes a token: it stops working on the next request that carries it. */
  revoke(id: string): Promise<AccessTokenListing> {
    const state = this.#state;
    return state.locked(async () => {
      const t = state.tokens.get(id);
      if (t === undefined) throw new NotFoundError(`no token ${id}`);
      state.tokens.delete(id);
      await state.store.deleteToken(id);
      await state.event("token_revoked", `token/${id}`, `${t.kind} token revoked`);
      return listing(t);
    });
  }

  /** True while a token of `kind` is stored and unexpired (the first start checks for admin). */
  hasLive(kind: AccessTokenKind): boolean {
    const now = this.#state.now();
    return [...this.#state.tokens.values()].some((t) =>
      t.kind === kind && (t.expires_at === null || t.expires_at > now)
    );
  }

  /**
   * The kind of a presented stored token, or null when it is unknown,
   * expired or revoked. Found by id, matched by hash in constant time.
   */
  async kindOf(token: string): Promise<AccessTokenKind | null> {
    const parts = tokenParts(token);
    if (parts === null) return null;
    const t = this.#state.tokens.get(parts.id);
    if (t === undefined || !(await tokenMatches(parts.credential, t.hash))) return null;
    return t.expires_at === null || t.expires_at > this.#state.now() ? t.kind : null;
  }

  /** Hashes of the live metrics tokens, for agents to check Prometheus with. */
  metricsHashes(): string[] {
    const now = this.#state.now();
    return [...this.#state.tokens.values()]
      .filter((t) => t.kind === "metrics" && (t.expires_at === null || t.expires_at > now))
      .map((t) => t.hash);
  }
}
