/**
 * Text tables for terminals: columns aligned by display width, so wide
 * characters (CJK, emoji) and combining marks line up, and cells cut at a
 * word with the cut marked.
 *
 * @module
 */

/** Zero-width code points: combining marks, joiners, variation selectors. */
const ZERO_WIDTH = /^[\p{Mn}\p{Me}\u200B-\u200F\u2060\uFE00-\uFE0F]$/u;

/**
 * East Asian Wide and Fullwidth ranges, and emoji presentation: two columns
 * in a terminal (Unicode UAX #11, the ranges terminals use).
 */
const WIDE =
  /^(?:[\u1100-\u115F\u2E80-\u303E\u3041-\u33FF\u3400-\u4DBF\u4E00-\u9FFF\uA000-\uA4CF\uAC00-\uD7A3\uF900-\uFAFF\uFE30-\uFE4F\uFF00-\uFF60\uFFE0-\uFFE6\u{20000}-\u{3FFFD}]|\p{Emoji_Presentation})$/u;
/^[\u1100-\u115F\u2E80-\u303E\u3041-\u33FF\u3400-\u4DBF\u4E00-\u9FFF\uA000-\uA4CF\uAC00-\uD7A3\uF900-\uFAFF\uFE30-\uFE4F\uFF00-\uFF60\uFFE0-\uFFE6\u{1F300}-\u{1F64F}\u{1F900}-\u{1F9FF}\u{20000}-\u{3FFFD}]$/u;

/** How many terminal columns `text` takes. */
export function displayWidth(text: string): number {
  let width = 0;
  for (const ch of text) {
    if (ZERO_WIDTH.test(ch)) continue;
    width += WIDE.test(ch) ? 2 : 1;
  }
  return width;
}

/** Pads `text` with spaces to `width` display columns. */
export function padEndDisplay(text: string, width: number): string {
  return text + " ".repeat(Math.max(0, width - displayWidth(text)));
}

/** Renders columns left-aligned by display width with two spaces between them. */
export function renderTable(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) =>
    Math.max(displayWidth(h), ...rows.map((r) => displayWidth(r[i] ?? "")))
  );
  const line = (cells: string[]) =>
    cells.map((c, i) => padEndDisplay(c ?? "", widths[i])).join("  ").trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/**
 * One line of at most `max` display columns: text past the first line or
 * past `max` is cut at a word boundary and the cut marked with `…`.
 */
export function cutAtWord(text: string, max: number): string {
  const line = text.split("\n")[0];
  if (displayWidth(line) <= max && line === text) return text;
  if (displayWidth(line) <= max - 2) return `${line} …`;
  let cut = "";
  for (const ch of line) {
    if (displayWidth(cut + ch) > max - 1) break;
    cut += ch;
  }
  const space = cut.lastIndexOf(" ");
  return `${space > cut.length / 2 ? cut.slice(0, space) : cut}…`;
}
