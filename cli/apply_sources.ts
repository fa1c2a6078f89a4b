/**
 * What `llmgw apply -f` reads: files, directories (every .yaml, .yml and
 * .json inside, in name order) and standard input (`-`), each YAML source
 * possibly holding several documents separated by `---`.
 *
 * @module
 */
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { UsageError } from "./usage_error.ts";
import { errorMessage } from "../text/error_message.ts";

/** One deployment document and where it came from, for messages. */
export interface ApplyDocument {
  /** `FILE`, `FILE (document 2)` or `standard input`. */
  source: string;
  /** The decoded document. */
  doc: unknown;
}

const EXTENSIONS = /\.(ya?ml|json)$/i;

/**
 * Decodes one source's text into its documents (pure).
 *
 * @throws {UsageError} Naming the source (and document) that is not valid YAML or JSON.
 */
export function decodeDocuments(text: string, source: string): ApplyDocument[] {
  return decodeEach(text, source).flatMap(listItems);
}

/**
 * A document that is a list (what `llmgw get deployments -o json` prints
 * for several) stands for each of its items, so get's output applies back.
 */
function listItems(d: ApplyDocument): ApplyDocument[] {
  if (!Array.isArray(d.doc)) return [d];
  return d.doc.map((doc, i) => ({ source: `${d.source} (item ${i + 1})`, doc }));
}

function decodeEach(text: string, source: string): ApplyDocument[] {
  if (/\.json$/i.test(source)) {
    try {
      return [{ source, doc: JSON.parse(text) }];
    } catch (e) {
      throw new UsageError(`apply: ${source} is not valid JSON: ${firstLine(e)}`, "apply");
    }
  }
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const out: ApplyDocument[] = [];
  for (const [i, d] of list.entries()) {
    const where = list.length > 1 ? `${source} (document ${i + 1})` : source;
    if (d.errors.length > 0) {
      throw new UsageError(`apply: ${where} is not valid YAML: ${firstLine(d.errors[0])}`, "apply");
    }
    const doc = d.toJS();
    if (doc === null || doc === undefined) continue; // an empty document between separators
    out.push({ source: where, doc });
  }
  return out;
}

function firstLine(e: unknown): string {
  return errorMessage(e).split("\n")[0];
}

/**
 * Reads every `-f` source into documents, in order.
 *
 * @throws {UsageError} For a missing or unreadable path, an empty directory or bad YAML/JSON.
 */
export async function readApplySources(
  paths: readonly string[],
  stdin: () => Promise<string> = readStdin,
): Promise<ApplyDocument[]> {
  const out: ApplyDocument[] = [];
  for (const path of paths) {
    if (path === "-") {
      out.push(...decodeDocuments(await stdin(), "standard input"));
      continue;
    }
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(path);
    } catch {
      throw new UsageError(`apply: cannot read ${path}: no such file or directory`, "apply");
    }
    const files = info.isDirectory
      ? [...Deno.readDirSync(path)].filter((e) => e.isFile && EXTENSIONS.test(e.name))
        .map((e) => join(path, e.name)).sort()
      : [path];
    if (files.length === 0) {
      throw new UsageError(`apply: ${path} holds no .yaml, .yml or .json file`, "apply");
    }
    for (const file of files) {
      let text: string;
      try {
        text = await Deno.readTextFile(file);
      } catch (e) {
        throw new UsageError(`apply: cannot read ${file}: ${firstLine(e)}`, "apply");
      }
      out.push(...decodeDocuments(text, file));
    }
  }
  return out;
}

async function readStdin(): Promise<string> {
  return await new Response(Deno.stdin.readable).text();
}
