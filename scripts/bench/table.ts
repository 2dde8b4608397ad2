/** A table of a report: headers and rows of cell texts; the first two columns are labels, the rest figures. */
export type Table = { headers: string[]; rows: string[][] };

/** A part of a report: a heading, an optional table, lines under it, and text kept as it is (query plans). */
export type Section = { title: string; table?: Table; lines: string[]; preformatted?: string[] };

/** The table as aligned plain text (labels left, figures right). */
export function textTable({ headers, rows }: Table): string {
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column < 2 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  return [line(headers), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

/** The table in Markdown. */
export function markdownTable({ headers, rows }: Table): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(headers), line(headers.map((_, column) => (column < 2 ? '---' : '---:'))), ...rows.map(line)].join('\n');
}

/** A section as plain text, for the terminal. */
export function sectionText(section: Section): string[] {
  return [section.title, ...(section.table ? [textTable(section.table)] : []), ...section.lines, ...(section.preformatted ?? [])];
}

/** A section in Markdown: a level-2 heading, the table, the lines as a list. */
export function sectionMarkdown(section: Section): string[] {
  const preformatted = section.preformatted ? ['', '```', ...section.preformatted, '```'] : [];
  return [`## ${section.title}`, '', ...(section.table ? [markdownTable(section.table), ''] : []), ...section.lines.map((line) => `- ${line}`), ...preformatted];
}

/** A duration in ms with two decimals; '-' when there is none. */
export const ms = (value: number | undefined) => (value === undefined || Number.isNaN(value) ? '-' : value.toFixed(2));
