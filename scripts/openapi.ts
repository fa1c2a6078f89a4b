/**
 * Prints the control plane's OpenAPI document (what `GET /openapi.json`
 * serves) to stdout, for linting and for clients' generators.
 *
 * Usage: deno run scripts/openapi.ts > openapi.json
 *
 * @module
 */
import { controlRoutes } from "../control/api.ts";
import { ControlPlane } from "../control/control_plane.ts";
import { MemoryStore } from "../control/store/memory_store.ts";
import { openApiDocument } from "../control/openapi.ts";

const cp = await ControlPlane.open({ store: new MemoryStore() });
console.log(JSON.stringify(openApiDocument(controlRoutes(cp)), null, 2));
