import { partialTagLength } from './think-tags.js';

/**
 * The tool-call formats a model writes as text, which a server started without its tool-call
 * parser (or whose parser missed) leaves in the reply: Hermes and Qwen's `<tool_call>` JSON,
 * Llama 3's bare JSON (optionally after `<|python_tag|>`), Mistral's `[TOOL_CALLS]`. The same
 * markup vLLM's and SGLang's parsers read (`hermes_tool_parser.py`, `llama_tool_parser.py`,
 * `mistral_tool_parser.py`; `hermes_detector.py`, `llama32_detector.py`, `mistral_detector.py`).
 */
export const TOOL_CALL_FORMATS = ['hermes', 'llama3_json', 'mistral'] as const;

/** One of `TOOL_CALL_FORMATS`. */
export type ToolCallFormat = (typeof TOOL_CALL_FORMATS)[number];

/** A tool call read from the reply's text; `arguments` is JSON text (or what the model wrote, when it is not JSON). */
export type TextToolCall = { format: ToolCallFormat; name: string; arguments: string; id?: string };

/** What a piece of text held: the text that is the reply's, and the calls read out of it. */
export type MarkupRead = { content: string; calls: TextToolCall[] };

const HERMES_OPEN = '<tool_call>';
const HERMES_CLOSE = '</tool_call>';
const MISTRAL_MARK = '[TOOL_CALLS]';
const PYTHON_TAG = '<|python_tag|>';

type Mode = { kind: 'text' } | { kind: 'hermes' } | { kind: 'rest'; format: 'mistral' | 'llama3_json'; marker: string };

/**
 * Reads tool calls written as text out of a reply as it streams. Only what may be markup is
 * held back: the end of a piece that may begin a marker, a marked call until it is complete
 * (Hermes: its closing tag; Mistral and Llama 3: the end of the reply, where their calls end),
 * and, when Llama 3's format is read, a reply that begins with `{`, until it ends. Markup that
 * holds no call it can read is given back as text. Whitespace is held until text follows it, so
 * the blank lines between calls never reach the reply.
 */
export class ToolCallMarkupReader {
  private mode: Mode = { kind: 'text' };
  private held = '';
  private textLetOut = false;
  /** Some call was read: whitespace left at the end is not the reply's. */
  private callsRead = false;
  private readonly markers: string[];

  constructor(private readonly formats: readonly ToolCallFormat[]) {
    this.markers = [
      ...(formats.includes('hermes') ? [HERMES_OPEN] : []),
      ...(formats.includes('mistral') ? [MISTRAL_MARK] : []),
      ...(formats.includes('llama3_json') ? [PYTHON_TAG] : []),
    ];
  }

  /** True when some format is read at all. */
  get active(): boolean {
    return this.formats.length > 0;
  }

  /** The text and calls of the next piece of the reply. */
  push(piece: string): MarkupRead {
    if (!this.active) return { content: piece, calls: [] };
    this.held += piece;
    const read: MarkupRead = { content: '', calls: [] };
    for (;;) {
      const before = this.mode.kind;
      this.step(read);
      if (this.mode.kind === before) break;
    }
    return read;
  }

  /** What is still held, once the reply is complete. */
  end(): MarkupRead {
    const read: MarkupRead = { content: '', calls: [] };
    const rest = this.held;
    this.held = '';
    if (this.mode.kind === 'hermes') {
      // A server may stop at the closing tag as a stop word: the call is what was written.
      const calls = callsOfJson(rest, 'hermes');
      if (calls.length > 0) read.calls.push(...calls);
      else read.content += HERMES_OPEN + rest;
    } else if (this.mode.kind === 'rest') {
      const calls = this.mode.format === 'mistral' ? mistralCalls(rest) : callsOfJson(rest, 'llama3_json', ';');
      if (calls.length > 0) read.calls.push(...calls);
      else read.content += this.mode.marker + rest;
    } else {
      read.content += this.callsRead ? rest.trimEnd() : rest;
    }
    this.mode = { kind: 'text' };
    this.callsRead ||= read.calls.length > 0;
    return read;
  }

  /** One step of reading: it changes the mode when it read up to a marker's end. */
  private step(read: MarkupRead): void {
    if (this.mode.kind === 'hermes') {
      const close = this.held.indexOf(HERMES_CLOSE);
      if (close < 0) return;
      const body = this.held.slice(0, close);
      this.held = this.held.slice(close + HERMES_CLOSE.length);
      const calls = callsOfJson(body, 'hermes');
      this.callsRead ||= calls.length > 0;
      if (calls.length > 0) read.calls.push(...calls);
      else this.letOut(read, HERMES_OPEN + body + HERMES_CLOSE);
      this.mode = { kind: 'text' };
      return;
    }
    if (this.mode.kind === 'text') this.inText(read);
  }

  private inText(read: MarkupRead): void {
    let first = -1;
    let marker = '';
    for (const candidate of this.markers) {
      const at = this.held.indexOf(candidate);
      if (at >= 0 && (first < 0 || at < first)) [first, marker] = [at, candidate];
    }
    if (first >= 0) {
      // The blank lines before a call (and between calls) are not the reply's.
      this.letOut(read, this.held.slice(0, first).trimEnd());
      this.held = this.held.slice(first + marker.length);
      if (marker === HERMES_OPEN) this.mode = { kind: 'hermes' };
      else this.mode = { kind: 'rest', format: marker === MISTRAL_MARK ? 'mistral' : 'llama3_json', marker };
      return;
    }
    if (!this.textLetOut && this.formats.includes('llama3_json') && this.held.trimStart().startsWith('{')) {
      // Llama 3 writes its calls as the whole reply, bare JSON: a reply that begins with `{` waits to its end.
      this.mode = { kind: 'rest', format: 'llama3_json', marker: '' };
      return;
    }
    const partial = Math.max(0, ...this.markers.map((candidate) => partialTagLength(this.held, candidate)));
    const keep = partial + trailingSpaceLength(this.held.slice(0, this.held.length - partial));
    this.letOut(read, this.held.slice(0, this.held.length - keep));
    this.held = this.held.slice(this.held.length - keep);
  }

  private letOut(read: MarkupRead, text: string): void {
    if (text === '') return;
    if (text.trim() !== '') this.textLetOut = true;
    read.content += text;
  }
}

function trailingSpaceLength(text: string): number {
  return text.length - text.trimEnd().length;
}

/**
 * The calls in JSON text: each top-level object (or array of objects) that names a function,
 * with `arguments` or Llama's `parameters`. JSON the model broke still gives its call when its
 * name can be read: the arguments are then what it wrote, for the tool's error to show it.
 */
function callsOfJson(text: string, format: ToolCallFormat, separator?: string): TextToolCall[] {
  const values = jsonValues(text, separator);
  if (values === undefined) {
    const broken = brokenCall(text, format);
    return broken ? [broken] : [];
  }
  return values.flatMap((value) => (Array.isArray(value) ? value : [value])).flatMap((value) => callOf(value, format));
}

/** The JSON values of a text holding only values (and whitespace, or `separator`), or undefined. */
function jsonValues(text: string, separator?: string): unknown[] | undefined {
  const values: unknown[] = [];
  let rest = text.trim();
  while (rest !== '') {
    const end = jsonValueEnd(rest);
    if (end < 0) return undefined;
    try {
      values.push(JSON.parse(rest.slice(0, end)));
    } catch {
      return undefined;
    }
    rest = rest.slice(end).trim();
    if (separator && rest.startsWith(separator)) rest = rest.slice(separator.length).trim();
  }
  return values;
}

/** Where the object or array at the start of `text` ends (just after it), or -1. */
function jsonValueEnd(text: string): number {
  if (text[0] !== '{' && text[0] !== '[') return -1;
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const char = text[index];
    if (inString) {
      if (char === '\\') index++;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === '{' || char === '[') depth++;
    else if (char === '}' || char === ']') {
      depth--;
      if (depth === 0) return index + 1;
    }
  }
  return -1;
}

function callOf(value: unknown, format: ToolCallFormat): TextToolCall[] {
  if (value === null || typeof value !== 'object') return [];
  const fields = value as Record<string, unknown>;
  const nested = fields.function !== null && typeof fields.function === 'object' ? (fields.function as Record<string, unknown>) : undefined;
  const name = typeof fields.name === 'string' ? fields.name : nested && typeof nested.name === 'string' ? nested.name : undefined;
  if (name === undefined || name === '') return [];
  const args = fields.arguments ?? fields.parameters ?? nested?.arguments ?? nested?.parameters ?? {};
  const id = typeof fields.id === 'string' && fields.id !== '' ? { id: fields.id } : {};
  return [{ format, name, arguments: typeof args === 'string' ? args : JSON.stringify(args), ...id }];
}

/** A call whose JSON is broken, when its name can be read: its arguments as written. */
function brokenCall(text: string, format: ToolCallFormat): TextToolCall | undefined {
  const name = /"name"\s*:\s*"((?:[^"\\]|\\.)+)"/.exec(text)?.[1];
  if (name === undefined) return undefined;
  const written = /"(?:arguments|parameters)"\s*:\s*([\s\S]*)$/.exec(text)?.[1]?.trim() ?? '';
  // What follows the arguments may be the call object's own closing brace.
  const args = [written, written.replace(/}\s*$/, '')].find(isJson) ?? written;
  return { format, name: name.replace(/\\(.)/g, '$1'), arguments: args };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Mistral's calls after `[TOOL_CALLS]`: a JSON array of `{name, arguments}` (tokenizers before
 * v11), or `name{…}` / `name[ARGS]{…}` per call, each after its own `[TOOL_CALLS]` (v11 and later).
 */
function mistralCalls(text: string): TextToolCall[] {
  const calls: TextToolCall[] = [];
  for (const segment of text.split(MISTRAL_MARK)) {
    const trimmed = segment.trim();
    if (trimmed === '') continue;
    if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
      calls.push(...callsOfJson(trimmed, 'mistral'));
      continue;
    }
    const compact = /^([A-Za-z0-9_.:-]+)\s*(?:\[ARGS\])?\s*([\s\S]*)$/.exec(trimmed);
    if (!compact) return [];
    calls.push({ format: 'mistral', name: compact[1]!, arguments: compact[2]!.trim() || '{}' });
  }
  return calls;
}
