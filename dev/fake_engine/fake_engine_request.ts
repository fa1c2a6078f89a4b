/**
 * The fake engine's request validation (issue #23 item 10): it refuses, as
 * vLLM does, a completion body whose OpenAI fields have the wrong type or
 * shape (`temperature: "hot"`, `messages: "hi"`), so a client or gateway
 * tested against the fake meets the same 400 it would meet in production.
 *
 * vLLM validates a body with pydantic (ChatCompletionRequest,
 * CompletionRequest) before any handler runs, in pydantic's lax mode:
 * numeric strings are numbers, `"yes"` and `1` are booleans, but a word is
 * not a number and a string is not a list. Its handler answers 400
 * `{"error": {"message", "type": "Bad Request", "param", "code": 400}}`, the
 * message listing each error as pydantic reports it and `param` the first
 * error's location (docs/engine_reference.md §8). Fields the fake does not
 * know pass, as in vLLM (extra fields are allowed there too).
 *
 * The schema is a table of field kinds with pydantic's lax predicates, not
 * zod: the fake engine runs `--no-config` with no dependencies (dev/fake_engine/bin),
 * so it starts offline and under npx without resolving a package.
 *
 * @module
 */
import { json } from "./fake_engine_http.ts";

/** What a field must be, in pydantic's words. */
type Kind = "float" | "int" | "bool" | "string" | "list" | "dict" | "stop";

// pydantic's lax conversions: numbers from numeric strings and booleans,
// integers from whole numbers, booleans from these words and 0/1.
const NUMERIC = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/;
const WHOLE = /^\s*[+-]?\d+\s*$/;
const BOOL_WORDS = ["0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"];

/** Whether a value is a `kind` in pydantic's lax mode. */
const ACCEPTS: Record<Kind, (v: unknown) => boolean> = {
  float: (v) =>
    (typeof v === "number" && Number.isFinite(v)) || typeof v === "boolean" ||
    (typeof v === "string" && NUMERIC.test(v)),
  int: (v) =>
    (typeof v === "number" && Number.isInteger(v)) || typeof v === "boolean" ||
    (typeof v === "string" && WHOLE.test(v)),
  bool: (v) =>
    typeof v === "boolean" || v === 0 || v === 1 ||
    (typeof v === "string" && BOOL_WORDS.includes(v.trim().toLowerCase())),
  string: (v) => typeof v === "string",
  list: (v) => Array.isArray(v),
  dict: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
  stop: (v) => typeof v === "string" || (Array.isArray(v) && v.every((x) => typeof x === "string")),
};

/** The common OpenAI fields and what each must be (null is allowed for all of them). */
const COMMON: Record<string, Kind> = {
  model: "string",
  temperature: "float",
  top_p: "float",
  presence_penalty: "float",
  frequency_penalty: "float",
  max_tokens: "int",
  max_completion_tokens: "int",
  n: "int",
  seed: "int",
  stream: "bool",
  stream_options: "dict",
  stop: "stop",
  user: "string",
  logit_bias: "dict",
};

/** Fields only chat completions have. */
const CHAT: Record<string, Kind> = { logprobs: "bool", top_logprobs: "int", tools: "list" };

/** Fields only text completions have. */
const TEXT: Record<string, Kind> = {
  logprobs: "int",
  echo: "bool",
  best_of: "int",
  suffix: "string",
};

/** One error, as pydantic reports it. */
export interface FieldError {
  /** pydantic's error type, e.g. `float_parsing`. */
  type: string;
  /** Where, dotted from the body: `body.temperature`, `body.messages.0.role`. */
  loc: string;
  /** pydantic's words. */
  msg: string;
  /** The value refused. */
  input: unknown;
}

/** What pydantic says when `value` is not a `kind`. */
function refusal(kind: Kind, value: unknown): { type: string; msg: string } {
  if (value === undefined) return { type: "missing", msg: "Field required" };
  const str = typeof value === "string";
  switch (kind) {
    case "float":
      return str
        ? {
          type: "float_parsing",
          msg: "Input should be a valid number, unable to parse string as a number",
        }
        : { type: "float_type", msg: "Input should be a valid number" };
    case "int":
      if (typeof value === "number") {
        return {
          type: "int_from_float",
          msg: "Input should be a valid integer, got a number with a fractional part",
        };
      }
      return str
        ? {
          type: "int_parsing",
          msg: "Input should be a valid integer, unable to parse string as an integer",
        }
        : { type: "int_type", msg: "Input should be a valid integer" };
    case "bool":
      return str
        ? {
          type: "bool_parsing",
          msg: "Input should be a valid boolean, unable to interpret input",
        }
        : { type: "bool_type", msg: "Input should be a valid boolean" };
    case "string":
    case "stop":
      return { type: "string_type", msg: "Input should be a valid string" };
    case "list":
      return { type: "list_type", msg: "Input should be a valid list" };
    case "dict":
      return { type: "dict_type", msg: "Input should be a valid dictionary" };
  }
}

/** The errors of one field's value against its kind (none when null or absent). */
function fieldErrors(name: string, kind: Kind, value: unknown): FieldError[] {
  if (value === null || value === undefined || ACCEPTS[kind](value)) return [];
  return [{ ...refusal(kind, value), loc: `body.${name}`, input: value }];
}

/** The errors of `messages`: a list of messages, each an object with a string role. */
function messageErrors(body: Record<string, unknown>): FieldError[] {
  const messages = body.messages;
  // A missing field's input is the whole body, as pydantic reports it.
  if (messages === undefined) {
    return [{ ...refusal("list", undefined), loc: "body.messages", input: body }];
  }
  if (!Array.isArray(messages)) {
    return [{ ...refusal("list", messages), loc: "body.messages", input: messages }];
  }
  const out: FieldError[] = [];
  messages.forEach((m, i) => {
    const at = `body.messages.${i}`;
    if (m === null || typeof m !== "object" || Array.isArray(m)) {
      out.push({ ...refusal("dict", m), loc: at, input: m });
      return;
    }
    // A role that is text, and content that is text, parts or none.
    const msg = m as Record<string, unknown>;
    if (typeof msg.role !== "string") {
      out.push({ ...refusal("string", msg.role), loc: `${at}.role`, input: msg.role });
    }
    const content = msg.content;
    if (
      content !== undefined && content !== null && typeof content !== "string" &&
      !Array.isArray(content)
    ) {
      out.push({ ...refusal("string", content), loc: `${at}.content`, input: content });
    }
  });
  return out;
}

/** A value that passed its kind's check, as pydantic's lax mode hands it on. */
function laxValue(kind: Kind, value: unknown): unknown {
  if (kind === "float" || kind === "int") return Number(value);
  if (kind === "bool") {
    if (typeof value === "boolean") return value;
    return ["1", "on", "t", "true", "y", "yes"].includes(String(value).trim().toLowerCase());
  }
  return value;
}

/** A completion body checked: its errors, or the body with lax values converted. */
export type CheckedRequest =
  | { ok: true; body: Record<string, unknown> }
  | { ok: false; errors: FieldError[] };

/**
 * Checks a completion body as vLLM's pydantic models do, in field order:
 * the type and shape errors, or the body with lax values converted
 * (`n: "2"` is 2, `stream: "yes"` is true). Values the types allow but the
 * handler refuses (`max_tokens: 0`) are the handler's to refuse.
 */
export function checkRequest(body: Record<string, unknown>, kind: "chat" | "text"): CheckedRequest {
  const own = kind === "chat" ? CHAT : TEXT;
  const errors: FieldError[] = kind === "chat" ? messageErrors(body) : [];
  const out: Record<string, unknown> = { ...body };
  for (const [name, k] of Object.entries({ ...COMMON, ...own })) {
    const found = fieldErrors(name, k, body[name]);
    errors.push(...found);
    if (found.length === 0 && body[name] !== undefined && body[name] !== null) {
      out[name] = laxValue(k, body[name]);
    }
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, body: out };
}

/** The most errors one answer lists, as vLLM bounds them. */
export const MAX_REPORTED_ERRORS = 10;

/** A value as pydantic's error shows it (vLLM renders each `input` as text). */
function inputText(value: unknown): string {
  if (Array.isArray(value)) return `<list of ${value.length} items>`;
  if (value !== null && typeof value === "object") {
    return `<dict of ${Object.keys(value).length} items>`;
  }
  if (value === null) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  return String(value);
}

/** Python's repr of a string. */
function pyRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  const body = s.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll(quote, `\\${quote}`);
  return `${quote}${body}${quote}`;
}

/** vLLM's 400 for a body that failed validation. */
export function validationError(errors: readonly FieldError[]): Response {
  const count = errors.length;
  const label = count === 1 ? "error" : "errors";
  const lines = errors.slice(0, MAX_REPORTED_ERRORS).map((e) =>
    `  {'type': ${pyRepr(e.type)}, 'loc': ${pyRepr(e.loc)}, 'msg': ${pyRepr(e.msg)}, ` +
    `'input': ${pyRepr(inputText(e.input))}}`
  );
  if (count > MAX_REPORTED_ERRORS) {
    lines.push(`  ...and ${count - MAX_REPORTED_ERRORS} more ${label}`);
  }
  return json(400, {
    error: {
      message: `${count} validation ${label}:\n${lines.join("\n")}`,
      type: "Bad Request",
      param: errors[0]?.loc ?? null,
      code: 400,
    },
  });
}
