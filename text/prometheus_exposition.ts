/**
 * Writing Prometheus text exposition format 0.0.4: a family's HELP and TYPE
 * lines, then its samples, every name under one prefix and every label value
 * escaped (text/prometheus_label.ts).
 *
 * @module
 */
import { escapeLabelValue } from "./prometheus_label.ts";

/**
 * A label set's text, `k="v",…`, every value escaped: what a hot path (the
 * gateway's per-request counters) builds once, keeps, and hands to
 * {@link Exposition.sampleText}.
 */
export function labelText(labels: Record<string, string>): string {
  return Object.entries(labels).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`).join(",");
}

/** Lines of text exposition format, every name prefixed. */
export class Exposition {
  readonly #prefix: string;
  readonly #lines: string[] = [];

  /** A writer whose every metric name starts with `prefix` (`llmgw_agent_`). */
  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  /** A family's HELP and TYPE lines; `help` has its backslashes and line feeds escaped. */
  family(name: string, type: "gauge" | "counter" | "histogram", help: string): void {
    const escaped = help.replaceAll("\\", "\\\\").replaceAll("\n", "\\n");
    const full = this.#prefix + name;
    this.#lines.push(`# HELP ${full} ${escaped}`, `# TYPE ${full} ${type}`);
  }

  /** One sample of `name` with `labels` (values escaped). */
  sample(name: string, labels: Record<string, string>, value: number): void {
    this.sampleText(name, labelText(labels), value);
  }

  /** One sample of `name` whose label set is text {@link labelText} built (joined by commas). */
  sampleText(name: string, labels: string, value: number): void {
    const set = labels === "" ? "" : `{${labels}}`;
    this.#lines.push(`${this.#prefix}${name}${set} ${value}`);
  }

  /** The text, ending in a line feed. */
  text(): string {
    return this.#lines.join("\n") + "\n";
  }
}
