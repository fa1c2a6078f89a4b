/**
 * The dashboard's assets (docs/ui.md): htmx, the stylesheet and the log
 * script, served from the code; `open`, as the sign-in page needs them.
 *
 * @module
 */
import { Hono } from "hono";
import { assetNamed, assetResponse } from "../assets.ts";
import { text } from "./page_response.ts";

/** The asset routes. */
export function assetRoutes(): Hono {
  const app = new Hono();
  app.get("/ui/assets/:name", (c) => {
    const a = assetNamed(c.req.param("name"));
    if (a === undefined) {
      return text(c, `no asset ${c.req.param("name")}`, 404);
    }
    return assetResponse(a, c.req.header("accept-encoding"));
  });
  return app;
}
