/**
 * The models (docs/ui.md): the page at `/ui/models` and the fragment htmx
 * refreshes it with, from the same view as `llmgw get models`.
 *
 * @module
 */
import { Hono } from "hono";
import type { ControlPlane } from "../../control/control_plane.ts";
import { modelList } from "../../control/model_views.ts";
import { ModelsFragment, ModelsPage } from "../models_page.tsx";
import type { Guard } from "./guard.tsx";
import { html } from "./page_response.ts";

/** The model routes on `cp`, behind `guarded`. */
export function modelRoutes(cp: ControlPlane, guarded: Guard): Hono {
  const app = new Hono();
  app.get(
    "/ui/models",
    guarded(
      "page",
      async (c, s) => await html(c, <ModelsPage models={modelList(cp.state)} session={s} />, 200),
    ),
  );
  app.get(
    "/ui/fragments/models",
    guarded(
      "fragment",
      async (c) => await html(c, <ModelsFragment models={modelList(cp.state)} />, 200),
    ),
  );
  return app;
}
