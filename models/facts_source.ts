/**
 * Where the control plane and `llmgw plan` get a model's facts from
 * (models/model_facts.ts): the model's own `config.json` and
 * `model.safetensors.index.json` (else the sizes of its `*.safetensors`
 * files), from a local or shared path on this host, or from the hub through
 * a reader the hub client supplies. A source answers null for a model it
 * cannot read (a hub id with no hub reader): unknown facts refuse nothing.
 *
 * @module
 */
import { type ModelFacts, parseModelFacts } from "./model_facts.ts";
import { readTextIfPresent } from "./read_text_if_present.ts";

/** A place model facts come from. */
export interface ModelFactsSource {
  /**
   * The facts of `model` (a hub id or a path) at `revision` (a hub model's
   * branch, tag or commit; a source's default when absent; none for a
   * path); null when this source does not serve such a model.
   *
   * @throws {ModelFactsError} When the model's files are there but bad.
   * @throws {Error} When they cannot be read (naming the file).
   */
  facts(model: string, revision?: string): Promise<ModelFacts | null>;
}

/** One file of a model directory, as a directory listing gives it. */
export interface ListedFile {
  /** Its name inside the directory. */
  name: string;
  /** Its size in bytes. */
  size: number;
}

/** The file system a local source reads: the thin shell, injected in tests. */
export interface ModelDirFiles {
  /** The text of `path`; null when there is no such file. */
  readText(path: string): Promise<string | null>;
  /** The plain files of the directory `path` with their sizes. */
  list(path: string): Promise<ListedFile[]>;
}

/** The host's file system. */
export const hostFiles: ModelDirFiles = {
  readText: readTextIfPresent,
  async list(path) {
    const out: ListedFile[] = [];
    for await (const entry of Deno.readDir(path)) {
      // Hub snapshots link their files into blobs/: follow the link for the size.
      if (entry.isDirectory) continue;
      out.push({ name: entry.name, size: (await Deno.stat(`${path}/${entry.name}`)).size });
    }
    return out;
  },
};

/** The directory of a local model (`/models/llama`, `file:///models/llama`); null for a hub id. */
export function localModelDir(model: string): string | null {
  if (model.startsWith("file://")) return decodeURIComponent(new URL(model).pathname);
  return model.startsWith("/") ? model : null;
}

/** Reads the facts of models given as local or shared paths; a hub id is not its to answer. */
export function localFactsSource(files: ModelDirFiles = hostFiles): ModelFactsSource {
  return {
    async facts(model) {
      const dir = localModelDir(model);
      if (dir === null) return null;
      return await readModelDir(dir.replace(/\/+$/, ""), files);
    },
  };
}

/**
 * The facts of the model in directory `dir` (`llmgw plan --model-config`,
 * a local model).
 *
 * @throws {Error} Naming the file that is missing or bad.
 */
export async function readModelDir(
  dir: string,
  files: ModelDirFiles = hostFiles,
): Promise<ModelFacts> {
  const config = await files.readText(`${dir}/config.json`);
  if (config === null) throw new Error(`Cannot read model facts: no ${dir}/config.json`);
  const index = await files.readText(`${dir}/model.safetensors.index.json`);
  const safetensorsSizes = index === null
    ? (await files.list(dir)).filter((f) => f.name.endsWith(".safetensors")).map((f) => f.size)
    : undefined;
  return parseModelFacts({ source: dir, config, index: index ?? undefined, safetensorsSizes });
}

/**
 * Reads one file of a hub repository at a revision: the hub client's seam.
 * Null when the file does not exist (the hub's 404 `EntryNotFound`).
 */
export type HubFileReader = (repo: string, revision: string, path: string) => Promise<
  Uint8Array | null
>;

/** Lists a hub revision's files with their sizes (the revision API's siblings). */
export type HubFileLister = (repo: string, revision: string) => Promise<ListedFile[]>;

/**
 * Reads the facts of hub models through the hub client: `config.json`, the
 * index, else the listed sizes of the `*.safetensors` files, at the
 * revision asked for (`defaultRevision` when none is).
 */
export function hubFactsSource(
  read: HubFileReader,
  list: HubFileLister,
  defaultRevision = "main",
): ModelFactsSource {
  const decoder = new TextDecoder();
  return {
    async facts(model, at) {
      if (localModelDir(model) !== null || !/^[\w.-]+\/[\w.-]+$/.test(model)) return null;
      const revision = at ?? defaultRevision;
      const config = await read(model, revision, "config.json");
      if (config === null) throw new Error(`Cannot read model facts: ${model} has no config.json`);
      const index = await read(model, revision, "model.safetensors.index.json");
      const safetensorsSizes = index === null
        ? (await list(model, revision)).filter((f) => f.name.endsWith(".safetensors"))
          .map((f) => f.size)
        : undefined;
      return parseModelFacts({
        source: model,
        config: decoder.decode(config),
        index: index === null ? undefined : decoder.decode(index),
        safetensorsSizes,
      });
    },
  };
}

/** Asks each source in turn; the first that serves the model answers. */
export function firstSource(sources: readonly ModelFactsSource[]): ModelFactsSource {
  return {
    async facts(model, revision) {
      for (const source of sources) {
        const facts = await source.facts(model, revision);
        if (facts !== null) return facts;
      }
      return null;
    },
  };
}
