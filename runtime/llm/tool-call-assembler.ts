import { randomUUID } from 'node:crypto';
import type { ToolCall } from '../chat-types.js';
import { LlmCallError } from './upstream-errors.js';

/** A piece of a tool call as it streams: the OpenAI delta shape. */
export type ToolCallDelta = {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
};

/** What the assembler had to mend in the server's tool calls, for the call's record. */
export type ToolCallRepair = 'index' | 'id' | 'arguments_object';

/** A fresh tool-call id, for a call the server sent without one (`call_` and 24 hexadecimal characters). */
export function newToolCallId(): string {
  return `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

/**
 * Rebuilds whole tool calls from the pieces a server sends, mending what servers get wrong:
 * parallel calls that share an index but not an id (Ollama 0.8 to 0.9 sent every call with
 * index 0) or carry none, or a negative one (SGLang's non-streamed `-1`), are separate calls;
 * a call without an id gets one; arguments sent as an object are its JSON. The calls it hands
 * on are numbered 0, 1, 2… in the order they began. An entry that is not a tool call at all, or
 * a call that never got a name, is the server's error, said plainly.
 */
export class ToolCallAssembler {
  private readonly calls: ToolCall[] = [];
  /** The call each of the server's indexes currently continues. */
  private readonly byServerIndex = new Map<number, number>();
  /** The ids the assembler made for calls that came without one. */
  private readonly madeIds = new Set<string>();
  readonly repairs = new Set<ToolCallRepair>();

  /** Takes one streamed entry; returns the delta to hand on, numbered as the assembler counts calls. */
  add(entry: unknown): ToolCallDelta {
    const { serverIndex, id, name, args } = readEntry(entry);
    let ours = serverIndex === undefined ? this.lastIfContinued(id) : this.byServerIndex.get(serverIndex);
    const current = ours === undefined ? undefined : this.calls[ours];
    if (current && id !== undefined && current.id !== id && !this.madeIds.has(current.id) && current.function.name !== '') {
      // Same index, another id: the server numbered two calls alike.
      this.repairs.add('index');
      ours = undefined;
    }
    if (serverIndex === undefined && ours === undefined && this.calls.length > 0) this.repairs.add('index');
    const delta: ToolCallDelta = { index: 0 };
    if (ours === undefined) {
      ours = this.calls.length;
      this.calls.push({ id: id ?? this.madeId(), type: 'function', function: { name: '', arguments: '' } });
      Object.assign(delta, { id: this.calls[ours]!.id, type: 'function' as const });
    }
    if (serverIndex !== undefined) this.byServerIndex.set(serverIndex, ours);
    delta.index = ours;
    const call = this.calls[ours]!;
    const fn: NonNullable<ToolCallDelta['function']> = {};
    if (name !== undefined && name !== '' && name !== call.function.name) {
      call.function.name += name;
      fn.name = name;
    }
    if (args !== undefined && args.text !== '') {
      if (args.wasObject) this.repairs.add('arguments_object');
      call.function.arguments += args.text;
      fn.arguments = args.text;
    }
    if (fn.name !== undefined || fn.arguments !== undefined) delta.function = fn;
    return delta;
  }

  /** Takes a whole call (a non-streamed message's, or one read from the reply's text); returns it as one delta. */
  addWhole(call: { id?: string; name: string; arguments: string }): ToolCallDelta {
    const index = this.calls.length;
    const whole: ToolCall = { id: call.id ?? this.madeId(), type: 'function', function: { name: call.name, arguments: call.arguments } };
    this.calls.push(whole);
    return { index, id: whole.id, type: 'function', function: { name: call.name, arguments: call.arguments } };
  }

  /** How many calls began. */
  get count(): number {
    return this.calls.length;
  }

  /** The whole calls, in order; a call the server never named is its error. */
  result(): ToolCall[] {
    const unnamed = this.calls.find((call) => call.function.name === '');
    if (unnamed) throw new LlmCallError(`the LLM server sent a tool call without a function name (id ${unnamed.id})`);
    return this.calls;
  }

  private madeId(): string {
    const id = newToolCallId();
    this.madeIds.add(id);
    this.repairs.add('id');
    return id;
  }

  /** With no index, an entry continues the last call unless it brings an id of its own. */
  private lastIfContinued(id: string | undefined): number | undefined {
    const last = this.calls.length - 1;
    if (last < 0) return undefined;
    return id === undefined || id === this.calls[last]!.id ? last : undefined;
  }
}

type Entry = { serverIndex: number | undefined; id: string | undefined; name: string | undefined; args: { text: string; wasObject: boolean } | undefined };

/** The fields of a tool-call entry, each checked; anything but an object is the server's error. */
function readEntry(entry: unknown): Entry {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
    throw new LlmCallError(`the LLM server sent a malformed tool call: ${clip(JSON.stringify(entry))}`);
  }
  const fields = entry as { index?: unknown; id?: unknown; function?: unknown };
  const fn = fields.function;
  if (fn !== undefined && fn !== null && (typeof fn !== 'object' || Array.isArray(fn))) {
    throw new LlmCallError(`the LLM server sent a malformed tool call: ${clip(JSON.stringify(entry))}`);
  }
  const { name, arguments: args } = (fn ?? {}) as { name?: unknown; arguments?: unknown };
  const index = fields.index;
  return {
    serverIndex: typeof index === 'number' && Number.isInteger(index) && index >= 0 ? index : undefined,
    id: typeof fields.id === 'string' && fields.id !== '' ? fields.id : undefined,
    name: typeof name === 'string' ? name : undefined,
    args:
      typeof args === 'string'
        ? { text: args, wasObject: false }
        : args !== null && typeof args === 'object'
          ? { text: JSON.stringify(args), wasObject: true }
          : undefined,
  };
}

function clip(text: string | undefined): string {
  const shown = text ?? 'undefined';
  return shown.length > 200 ? `${shown.slice(0, 200)}…` : shown;
}
