/**
 * Reads a text file that may not be there: a model directory's optional
 * files (the safetensors index) and the model cache's own records.
 *
 * @module
 */

/** The file's text, or null when there is no such file; any other error is thrown. */
export async function readTextIfPresent(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
