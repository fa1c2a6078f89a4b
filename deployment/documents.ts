/**
 * The one reader of deployment text (design §6.1), for `llmgw apply` and
 * `llmgw plan` alike: JSON when the source's name ends in `.json`, otherwise
 * YAML (which reads JSON text too), with several documents separated by
 * `---`, and a document that is a list (what `llmgw get deployments -o json`
 * prints for several) standing for each of its items. Pure: callers read the
 * files and say what a refusal means to their user.
 *
 * @module
 */
import { parseAllDocuments } from "yaml";
import { errorMessage } from "../text/error_message.ts";

/** One decoded document and where it came from, for messages. */
export interface DeploymentDocument {
  /** `FILE`, `FILE (document 2)`, `FILE (item 3)` or `standard input`. */
  source: string;
  /** The decoded document, not yet checked against the schema. */
  doc: unknown;
}

/** Raised for text that is not valid YAML or JSON; the message names the source and document. */
export class DocumentError extends Error {
  /** The source (and document) that could not be read. */
  readonly source: string;
  /** What is wrong, without the source: `not valid JSON: …`. */
  readonly reason: string;
  /** Creates the error. */
  constructor(source: string, reason: string) {
    super(`${source} is ${reason}`);
    this.name = "DocumentError";
    this.source = source;
    this.reason = reason;
  }
}

/**
 * Decodes one source's text into its documents, in order; empty documents
 * (between separators) are skipped.
 *
 * @throws {DocumentError} Naming the source (and document) that is not valid YAML or JSON.
 */
export function decodeDocuments(text: string, source: string): DeploymentDocument[] {
  return decodeEach(text, source).flatMap(listItems);
}

function listItems(d: DeploymentDocument): DeploymentDocument[] {
  if (!Array.isArray(d.doc)) return [d];
  return d.doc.map((doc, i) => ({ source: `${d.source} (item ${i + 1})`, doc }));
}

function decodeEach(text: string, source: string): DeploymentDocument[] {
  if (/\.json$/i.test(source)) {
    try {
      return [{ source, doc: JSON.parse(text) }];
    } catch (e) {
      throw new DocumentError(source, `not valid JSON: ${firstLine(e)}`);
    }
  }
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  const out: DeploymentDocument[] = [];
  for (const [i, d] of list.entries()) {
    const where = list.length > 1 ? `${source} (document ${i + 1})` : source;
    if (d.errors.length > 0) {
      throw new DocumentError(where, `not valid YAML or JSON: ${firstLine(d.errors[0])}`);
    }
    const doc = d.toJS();
    if (doc === null || doc === undefined) continue;
    out.push({ source: where, doc });
  }
  return out;
}

function firstLine(e: unknown): string {
  return errorMessage(e).split("\n")[0];
}
