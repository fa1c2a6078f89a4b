/**
 * What `llmgw apply -f` reads: files, directories (every .yaml, .yml and
 * .json inside, in name order) and standard input (`-`), each YAML source
 * possibly holding several documents separated by `---`.
 *
 * @module
 */
import { join } from "node:path";
import {
  decodeDocuments as decodeDeploymentDocuments,
  type DeploymentDocument,
  DocumentError,
} from "../deployment/documents.ts";
import { UsageError } from "./usage_error.ts";
import { errorMessage } from "../text/error_message.ts";

/** One deployment document and where it came from, for messages. */
export type ApplyDocument = DeploymentDocument;

const EXTENSIONS = /\.(ya?ml|json)$/i;

/**
 * Decodes one source's text into its documents (pure), by the one reader
 * `plan` uses too (deployment/documents.ts).
 *
 * @throws {UsageError} Naming the source (and document) that is not valid YAML or JSON.
 */
export function decodeDocuments(text: string, source: string): ApplyDocument[] {
  try {
    return decodeDeploymentDocuments(text, source);
  } catch (e) {
    if (e instanceof DocumentError) throw new UsageError(`apply: ${e.message}`, "apply");
    throw e;
  }
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
