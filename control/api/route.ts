/**
 * One declaration per route: method, path, who may call it, and the zod
 * schemas of its path parameters, query, body and answer. The same
 * declaration registers the Hono handler (validation at the edge, before the
 * handler runs) and writes the route's part of the OpenAPI document, so the
 * document cannot drift from what the API checks.
 *
 * @module
 */
import { type Context, Hono } from "hono";
import type { z } from "zod";
import { zodIssues } from "../../validation/issues.ts";
import { ApiError } from "../api_error.ts";

/**
 * The kind of token a route needs; `open` needs none. Which token kinds
 * each accepts is one table, `ACCEPTS` in auth.ts.
 */
export type TokenKind = "open" | "admin" | "gateway" | "metrics" | "join" | "node";

/** A route's declaration. */
export interface RouteSpec<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
> {
  /** HTTP method. */
  method: "get" | "post" | "put" | "delete";
  /** Hono path, `:name` for parameters. */
  path: string;
  /** Stable operation id. */
  operationId: string;
  /** One line for the document. */
  summary: string;
  /** The resource group. */
  tag: string;
  /** Who may call it. */
  auth: TokenKind;
  /** Path parameters (an object schema), validated before the handler. */
  params?: P;
  /** Query (an object schema), validated before the handler. */
  query?: Q;
  /**
   * The JSON body, validated before the handler; `raw: true` hands the
   * decoded body on unvalidated (the service validates it with its own
   * field paths) while the document still shows the schema.
   */
  body?: { schema: B; raw?: boolean };
  /** The answer's schema, for the document. */
  response: z.ZodType;
  /** The success status. Default 200. */
  status?: 200 | 201;
  /** Other answers the route gives besides the input and auth errors, with why. */
  answers?: Partial<Record<200 | 403 | 404 | 409 | 502 | 503, string>>;
  /** Content type of the answer. Default JSON. */
  contentType?: "application/json" | "text/plain";
}

/** What a handler receives: the validated parts of the request. */
export interface RouteInput<P, Q, B> {
  /** Path parameters. */
  params: P;
  /** Query. */
  query: Q;
  /** Body. */
  body: B;
  /** The Hono context, for headers and the raw request. */
  c: Context;
}

/** Checks the caller's token for a route kind; throws 401/403 ApiErrors. */
export type Authorizer = (kind: TokenKind, c: Context) => Promise<void>;

/** Parses with a zod schema or throws a 400 naming each field. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw ApiError.fromIssues(what, zodIssues(r.error));
  return r.data;
}

/** Decodes a JSON body or throws a 400. */
export async function jsonBody(c: Context): Promise<unknown> {
  try {
    return await c.req.json();
  } catch {
    throw new ApiError(400, "invalid_json", "request body is not valid JSON");
  }
}

/**
 * One resource's route group: declarations under a path prefix, mounted on
 * the app with `app.route(prefix, group)`.
 */
export class RouteGroup {
  /** The group's path prefix, e.g. `/v1/nodes`. */
  readonly prefix: string;
  readonly #specs: RouteSpec[] = [];
  readonly #mounts: ((app: Hono, authorize: Authorizer) => void)[] = [];

  /** Creates an empty group; spec paths are relative to `prefix`. */
  constructor(prefix: string) {
    this.prefix = prefix;
  }

  /** Declares a route and its handler. */
  add<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType>(
    spec: RouteSpec<P, Q, B>,
    handler: (
      input: RouteInput<z.output<P>, z.output<Q>, z.output<B>>,
    ) => unknown | Promise<unknown>,
  ): void {
    this.#specs.push(spec as unknown as RouteSpec);
    const what = `Cannot ${spec.summary.charAt(0).toLowerCase()}${spec.summary.slice(1)}`;
    this.#mounts.push((app, authorize) => {
      app[spec.method](spec.path, async (c) => {
        // Authentication comes first: no token is 401 and a wrong one 403,
        // whatever the request holds.
        await authorize(spec.auth, c);
        const params = spec.params === undefined
          ? {}
          : parseInput(spec.params, c.req.param(), what);
        const query = spec.query === undefined ? {} : parseInput(spec.query, c.req.query(), what);
        let body: unknown = undefined;
        if (spec.body !== undefined) {
          body = await jsonBody(c);
          if (spec.body.raw !== true) body = parseInput(spec.body.schema, body, what);
        }
        const result = await handler({
          params: params as z.output<P>,
          query: query as z.output<Q>,
          body: body as z.output<B>,
          c,
        });
        if (result instanceof Response) return result;
        if (spec.contentType === "text/plain") {
          return c.text(String(result), spec.status ?? 200, {
            "content-type": "text/plain; version=0.0.4",
          });
        }
        return c.json(result, spec.status ?? 200);
      });
    });
  }

  /** Every declaration with its full path, in order. */
  specs(): RouteSpec[] {
    return this.#specs.map((s) => ({
      ...s,
      path: s.path === "/" ? this.prefix : `${this.prefix}${s.path}`,
    }));
  }

  /** The group as a Hono app, every handler registered. */
  app(authorize: Authorizer): Hono {
    const group = new Hono();
    for (const m of this.#mounts) m(group, authorize);
    return group;
  }
}
