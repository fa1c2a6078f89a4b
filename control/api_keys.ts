/**
 * Gateway API keys: created with access to some served models (or all),
 * shown once, stored hashed; gateways read the hashes.
 *
 * @module
 */
import { NotFoundError } from "./errors.ts";
import type { ControlState } from "./state.ts";
import { hashToken, newToken } from "../http/tokens.ts";

/** A key as listed: never its secret or its hash. */
export interface ApiKeyListing {
  /** Key id. */
  id: string;
  /** The operator's name for it. */
  name: string;
  /** Served model names it may use; null for all. */
  models: string[] | null;
  /** When it was created. */
  created_at: number;
}

/** A key as gateways need it: its hash and models. */
export interface ApiKeyHash {
  /** Key id. */
  id: string;
  /** SHA-256 of the key, hex. */
  hash: string;
  /** Served model names it may use; null for all. */
  models: string[] | null;
}

/** The API key service. */
export class ApiKeyService {
  readonly #state: ControlState;

  /** Creates the service. */
  constructor(state: ControlState) {
    this.#state = state;
  }

  /**
   * Creates a key with access to `models` (served names; null for all). The
   * key is returned once; only its hash is stored.
   */
  create(
    name: string,
    models: string[] | null,
  ): Promise<{ id: string; name: string; key: string; models: string[] | null }> {
    const state = this.#state;
    return state.locked(async () => {
      const key = newToken("sk-llmgw");
      const id = `key-${crypto.randomUUID().slice(0, 8)}`;
      const record = { id, name, hash: await hashToken(key), models, created_at: state.now() };
      await state.store.putApiKey(record);
      state.apiKeys.set(id, record);
      await state.event(
        "apikey_created",
        `apikey/${id}`,
        `${name}: ${models === null ? "all models" : models.join(", ")}`,
      );
      return { id, name, key, models };
    });
  }

  /** The keys, without their hashes. */
  list(): ApiKeyListing[] {
    return [...this.#state.apiKeys.values()].map(({ id, name, models, created_at }) => ({
      id,
      name,
      models,
      created_at,
    }));
  }

  /** The keys with their hashes, for gateways. */
  hashes(): ApiKeyHash[] {
    return [...this.#state.apiKeys.values()].map(({ id, hash, models }) => ({ id, hash, models }));
  }

  /** Deletes a key. */
  delete(id: string): Promise<void> {
    const state = this.#state;
    return state.locked(async () => {
      if (!state.apiKeys.has(id)) throw new NotFoundError(`no API key ${id}`);
      state.apiKeys.delete(id);
      await state.store.deleteApiKey(id);
      await state.event("apikey_deleted", `apikey/${id}`, "deleted");
    });
  }
}
