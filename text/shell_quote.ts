/**
 * Quoting for a POSIX shell, one rule for every command llmgw prints: the
 * vLLM plugin's multi-node wrapper and `llmgw plan --show-commands`.
 *
 * @module
 */

/**
 * Quotes a value for a POSIX shell: unchanged when it holds only characters
 * the shell never interprets, otherwise in single quotes, with each `'`
 * written as `'\''`.
 */
export function shellQuote(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replaceAll("'", `'\\''`)}'`;
}
