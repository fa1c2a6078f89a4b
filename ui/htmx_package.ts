/**
 * The pinned htmx package's minified file, read from Deno's npm cache: for
 * the generator and the test that the served copy is unchanged. Never used
 * at run time (the bundles have no npm cache to read).
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The package's version and `dist/htmx.min.js`. */
export async function htmxPackageFile(): Promise<
  { version: string; text: string }
> {
  // The package's entry resolves into its directory in the npm cache.
  const entry = fileURLToPath(import.meta.resolve("htmx.org"));
  const root = dirname(dirname(entry));
  const pkg = JSON.parse(
    await Deno.readTextFile(join(root, "package.json")),
  ) as {
    version: string;
  };
  return {
    version: pkg.version,
    text: await Deno.readTextFile(join(root, "dist/htmx.min.js")),
  };
}
