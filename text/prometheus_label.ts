/**
 * Prometheus text exposition format's label values, one rule for the three
 * `/metrics` llmgw serves (control plane, gateway, agent): a model name, a
 * GPU class or a node id may hold any character, and one unescaped `"` or
 * line feed would break every series after it.
 *
 * @module
 */

/** A label value as text exposition format 0.0.4 writes it: `\`, `"` and line feed escaped. */
export function escapeLabelValue(v: string): string {
  return v.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}
