/**
 * How an admin command prints: a table (`-o wide` for more columns), JSON
 * (`-o json`, `--json`) or YAML (`-o yaml`).
 *
 * @module
 */
import { stringify } from "yaml";
import { UsageError } from "./usage_error.ts";

/** An output format. */
export type OutputFormat = "table" | "wide" | "json" | "yaml";

/**
 * The format from `-o` and `--json`.
 *
 * @throws {UsageError} For an `-o` value that is none of wide, json or yaml.
 */
export function outputFormat(
  verb: string,
  output: string | undefined,
  json: boolean,
): OutputFormat {
  if (output !== undefined && output !== "wide" && output !== "json" && output !== "yaml") {
    throw new UsageError(`${verb}: -o must be wide, json or yaml, got "${output}"`, verb);
  }
  if (json || output === "json") return "json";
  return output ?? "table";
}

/** True for the machine-readable formats. */
export function isData(format: OutputFormat): format is "json" | "yaml" {
  return format === "json" || format === "yaml";
}

/** A value as JSON (indented) or one YAML document, with a final newline. */
export function dataText(format: "json" | "yaml", value: unknown): string {
  if (format === "json") return `${JSON.stringify(value, null, 2)}\n`;
  return stringify(value, { lineWidth: 0 });
}

/**
 * Documents as `apply -f` reads them back: YAML documents separated by
 * `---`, or JSON (one object, or an array for several).
 */
export function documentsText(
  format: "json" | "yaml",
  docs: readonly unknown[],
  one: boolean,
): string {
  if (format === "json") return dataText("json", one && docs.length === 1 ? docs[0] : docs);
  return docs.map((d) => dataText("yaml", d)).join("---\n");
}
