/**
 * MemoryStore against the store contract (design §11, §15).
 *
 * @module
 */
import { MemoryStore } from "./memory_store.ts";
import { storeContract } from "../../tests/store_contract.ts";

storeContract("MemoryStore", () => {
  const store = new MemoryStore();
  return Promise.resolve({ store, cleanup: () => Promise.resolve(store.close()) });
});
