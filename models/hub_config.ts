/**
 * Where the hub is and which token to show it, read as the hub's own client
 * reads them (`HF_ENDPOINT`, `HF_TOKEN`), plus a token file the operator
 * names, which must be readable by its owner only. The token is wrapped in
 * {@link HubToken}, which prints as `[redacted]` wherever it ends up (a log
 * line, JSON, `Deno.inspect`), so only the request's header sees it.
 *
 * @module
 */
import { DEFAULT_HUB_ENDPOINT } from "./hub_protocol.ts";

/** A hub token; only {@link HubToken.authorization} shows its value. */
export class HubToken {
  #value: string;
  /** Wraps `value` (already trimmed, not empty). */
  constructor(value: string) {
    this.#value = value;
  }
  /** The `Authorization` header's value: sent to the endpoint's origin only. */
  authorization(): string {
    return `Bearer ${this.#value}`;
  }
  /** Whether `text` contains the token (tests and redaction checks). */
  occursIn(text: string): boolean {
    return text.includes(this.#value);
  }
  /** Never the value. */
  toString(): string {
    return "[redacted]";
  }
  /** Never the value. */
  toJSON(): string {
    return "[redacted]";
  }
  /** Never the value. */
  [Symbol.for("Deno.customInspect")](): string {
    return "HubToken([redacted])";
  }
  /** Never the value. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return "HubToken([redacted])";
  }
}

/** The hub a control plane or agent talks to. */
export interface HubConfig {
  /** The endpoint without a trailing `/` (`https://huggingface.co`, or a mirror). */
  endpoint: string;
  /** The token, when one is configured. */
  token?: HubToken;
}

/** A configuration that cannot be used; the message names the variable or file. */
export class HubConfigError extends Error {
  /** Builds one. */
  constructor(message: string) {
    super(message);
    this.name = "HubConfigError";
  }
}

/** The file system calls {@link readTokenFile} makes (injected in tests). */
export interface TokenFiles {
  /** The file's permission bits, or null where the system has none. */
  mode(path: string): Promise<number | null>;
  /** The file's text. */
  read(path: string): Promise<string>;
}

const denoFiles: TokenFiles = {
  mode: async (path) => (await Deno.stat(path)).mode,
  read: (path) => Deno.readTextFile(path),
};

/** A token as huggingface_hub cleans it: newlines removed, trimmed; empty is none. */
export function cleanToken(raw: string | undefined): string | undefined {
  const token = raw?.replace(/[\r\n]/g, "").trim();
  return token ? token : undefined;
}

/**
 * Reads a token file, refusing one that others may read (mode must be 0600
 * or stricter, as huggingface_hub writes its own) or that is empty.
 */
export async function readTokenFile(
  path: string,
  files: TokenFiles = denoFiles,
): Promise<HubToken> {
  let mode: number | null;
  try {
    mode = await files.mode(path);
  } catch (e) {
    const why = e instanceof Deno.errors.NotFound ? "no such file" : "cannot read it";
    throw new HubConfigError(`Cannot use token file ${path}: ${why}`);
  }
  if (mode === null) {
    throw new HubConfigError(`Cannot use token file ${path}: its mode is unknown; it must be 0600`);
  }
  if ((mode & 0o077) !== 0) {
    const octal = (mode & 0o777).toString(8).padStart(4, "0");
    throw new HubConfigError(
      `Cannot use token file ${path}: its mode is ${octal}; it must be 0600 or stricter (chmod 600 ${path})`,
    );
  }
  let text: string;
  try {
    text = await files.read(path);
  } catch {
    throw new HubConfigError(`Cannot use token file ${path}: cannot read it`);
  }
  const token = cleanToken(text);
  if (token === undefined) throw new HubConfigError(`Cannot use token file ${path}: it is empty`);
  return new HubToken(token);
}

/** Checks and normalizes an endpoint: an http(s) URL without credentials, query or fragment. */
export function parseEndpoint(raw: string, from = "HF_ENDPOINT"): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new HubConfigError(`Cannot use ${from}: ${JSON.stringify(raw)} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new HubConfigError(`Cannot use ${from}: ${url.protocol} is not http: or https:`);
  }
  if (url.username || url.password) {
    throw new HubConfigError(`Cannot use ${from}: put no credentials in the URL; set HF_TOKEN`);
  }
  if (url.search || url.hash) {
    throw new HubConfigError(`Cannot use ${from}: the URL must have no query or fragment`);
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, "");
}

/** Where {@link hubConfig} reads from. */
export interface HubConfigSources {
  /** The environment (`Deno.env.get`). */
  env: (name: string) => string | undefined;
  /** A token file named in llmgw's own configuration. */
  tokenFile?: string;
  /** The file system, for the token file. */
  files?: TokenFiles;
}

/**
 * The hub configuration: `HF_ENDPOINT` (default the public hub); the token
 * from the token file named in llmgw's configuration, else `HF_TOKEN` (or
 * the older `HUGGING_FACE_HUB_TOKEN`), else the file `HF_TOKEN_PATH` names.
 * The user's own login file (`~/.cache/huggingface/token`) is never read
 * implicitly: a service does not borrow a person's login.
 */
export async function hubConfig(sources: HubConfigSources): Promise<HubConfig> {
  const rawEndpoint = sources.env("HF_ENDPOINT");
  const endpoint = rawEndpoint === undefined || rawEndpoint.trim() === ""
    ? DEFAULT_HUB_ENDPOINT
    : parseEndpoint(rawEndpoint.trim());
  if (sources.tokenFile !== undefined) {
    return { endpoint, token: await readTokenFile(sources.tokenFile, sources.files) };
  }
  const fromEnv = cleanToken(sources.env("HF_TOKEN") ?? sources.env("HUGGING_FACE_HUB_TOKEN"));
  if (fromEnv !== undefined) return { endpoint, token: new HubToken(fromEnv) };
  const path = sources.env("HF_TOKEN_PATH");
  if (path !== undefined && path !== "") {
    return { endpoint, token: await readTokenFile(path, sources.files) };
  }
  return { endpoint };
}
