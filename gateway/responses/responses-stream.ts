import type { ToolCallDelta } from '../../runtime/llm/llm-client.js';
import type { ToolActivity, TurnOutcome } from '../../runtime/sessions/supervisor.js';
import type { ApprovalRequest } from '../../runtime/tools/tool-approvals.js';
import type { ResponseBodyText, StoredResponseEvent } from '../../runtime/ports.js';
import type { ResponseEventSink } from '../../runtime/responses/response-event-log.js';
import {
  approvalRequestItem,
  bodyTextOf,
  endedResponse,
  functionCallItem,
  mcpCallItem,
  mcpCallItemId,
  messageItem,
  newItemId,
  outputItems,
  outputTextPart,
  reasoningItem,
  reasoningTextPart,
  responseBody,
  responseUsage,
  type OutputIds,
  type ResponseFrame,
  type ResponseObject,
} from './responses-format.js';

/** A client function call as it streams in. */
type StreamedCall = { itemId: string; outputIndex: number; id: string; name: string; arguments: string };

/** A streamed message or reasoning item; `deltaFields` is the constant part of its delta events' JSON (see `deltaFields`). */
type StreamedMessage = { itemId: string; outputIndex: number; text: string; open: boolean; deltaFields: string };

/**
 * The semantic events of one streamed response, each with the next `sequence_number`:
 * `response.created` and `response.in_progress`; each reasoning item (`output_item.added`,
 * `content_part.added`, a `reasoning_text.delta` per piece, `reasoning_text.done`,
 * `content_part.done`, `output_item.done`); each message item (`output_item.added`,
 * `content_part.added`, an `output_text.delta` per piece, `output_text.done`,
 * `content_part.done`, `output_item.done`); each call of the service's tools
 * (`output_item.added`, `mcp_call.in_progress`, `mcp_call_arguments.delta` and `.done`,
 * `mcp_call.completed` or `.failed`, `output_item.done`); each client function call
 * (`output_item.added`, `function_call_arguments.delta` and `.done`, `output_item.done`);
 * each call held for the user's approval (`output_item.added` and `output_item.done` of its
 * `mcp_approval_request`); then `response.completed`, or `response.failed` with the error. A
 * tool call ends the message before it: the next round's text is a message of its own.
 */
export class ResponseEventStream {
  private sequence = 0;
  private outputs = 0;
  private readonly messages: StreamedMessage[] = [];
  private readonly reasonings: StreamedMessage[] = [];
  private readonly mcpCalls = new Map<string, { itemId: string; outputIndex: number }>();
  private readonly calls = new Map<number, StreamedCall>();
  /** The finished items by output index: what a failed response shows. */
  private readonly finished = new Map<number, Record<string, unknown>>();
  /** The `mcp_call` items its readers were shown before the response was taken over, by item id, and whether each was done. */
  private readonly shownCalls = new Map<string, { outputIndex: number; done: boolean }>();
  /** `response.in_progress` was shown (before the response was taken over). */
  private shownInProgress = false;

  constructor(
    private readonly sink: ResponseEventSink,
    private readonly frame: ResponseFrame,
  ) {}

  /**
   * The stream of a background response taken over from a process that stopped, its readers
   * shown `events` so far: it goes on from their items, each with the text it had, and from
   * `nextSequence`. A call shown again (the turn's continuation reuses its stored result, or
   * runs it again) keeps the item it had; what was shown already is not shown twice.
   */
  static restored(sink: ResponseEventSink, frame: ResponseFrame, events: readonly StoredResponseEvent[], nextSequence: number): ResponseEventStream {
    const stream = new ResponseEventStream(sink, frame);
    for (const event of events) stream.replay(JSON.parse(event.data) as StoredEvent);
    stream.sequence = nextSequence;
    return stream;
  }

  /** The sequence number of the last event so far (-1 before the first). */
  get lastSequence(): number {
    return this.sequence - 1;
  }

  /** Takes in a stored event's effect on the items, without showing it again. */
  private replay(event: StoredEvent): void {
    const index = event.output_index ?? -1;
    const item = event.item;
    if (event.type === 'response.in_progress') this.shownInProgress = true;
    if (index >= this.outputs) this.outputs = index + 1;
    const streamed = (list: StreamedMessage[]) => list.find((entry) => entry.itemId === event.item_id);
    switch (event.type) {
      case 'response.output_item.added':
        if (item?.type === 'message') this.messages.push(streamedItem(String(item.id), index));
        if (item?.type === 'reasoning') this.reasonings.push(streamedItem(String(item.id), index));
        if (item?.type === 'mcp_call') this.shownCalls.set(String(item.id), { outputIndex: index, done: false });
        break;
      case 'response.output_text.delta':
        streamed(this.messages)!.text += event.delta ?? '';
        break;
      case 'response.reasoning_text.delta':
        streamed(this.reasonings)!.text += event.delta ?? '';
        break;
      case 'response.output_item.done': {
        this.finished.set(index, item!);
        const id = String(item!.id);
        for (const entry of [...this.messages, ...this.reasonings]) if (entry.itemId === id) entry.open = false;
        const call = this.shownCalls.get(id);
        if (call) call.done = true;
        break;
      }
    }
  }

  /** The first events: the response exists and is being produced. */
  begin(): void {
    this.emit('response.created', { response: responseBody(this.frame, { status: 'in_progress', output: [] }) });
    this.inProgress();
  }

  /** The first events of a background response, before its turn starts: it exists and waits. */
  queued(): void {
    const response = responseBody(this.frame, { status: 'queued', output: [] });
    this.emit('response.created', { response });
    this.emit('response.queued', { response });
  }

  /** The response is being produced (a background response's turn started). */
  inProgress(): void {
    if (this.shownInProgress) return;
    this.emit('response.in_progress', { response: responseBody(this.frame, { status: 'in_progress', output: [] }) });
  }

  /** The response as it stands while it is produced: the items so far, the open message with its text so far. */
  partial(): ResponseObject {
    const open = this.messages.at(-1);
    const thinking = this.reasonings.at(-1);
    const items = new Map(this.finished);
    if (open?.open) items.set(open.outputIndex, { ...messageItem(open.itemId, open.text, 'completed'), status: 'in_progress' });
    if (thinking?.open) items.set(thinking.outputIndex, { ...reasoningItem(thinking.itemId, thinking.text, 'completed'), status: 'in_progress' });
    return responseBody(this.frame, { status: 'in_progress', output: byOutputIndex(items) });
  }

  /** Closes the items of a turn that was cancelled and returns the response: `cancelled`, with what was produced until then. */
  cancel(): ResponseBodyText {
    this.closeItems();
    return bodyTextOf(responseBody(this.frame, { status: 'cancelled', output: byOutputIndex(this.finished) }));
  }

  /** A piece of the model's reasoning: it goes in the open reasoning item, or a new one. */
  reasoning(piece: string): void {
    this.closeMessage();
    let item = this.reasonings.at(-1);
    if (!item?.open) {
      item = streamedItem(newItemId('rs'), this.outputs++);
      this.reasonings.push(item);
      this.emit('response.output_item.added', { output_index: item.outputIndex, item: reasoningItem(item.itemId, '', 'in_progress') });
      this.emit('response.content_part.added', { item_id: item.itemId, output_index: item.outputIndex, content_index: 0, part: reasoningTextPart('') });
    }
    item.text += piece;
    this.emitDelta('response.reasoning_text.delta', item, piece, '}');
  }

  text(piece: string): void {
    this.closeReasoning();
    const message = this.openMessage();
    message.text += piece;
    this.emitDelta('response.output_text.delta', message, piece, ',"logprobs":[]}');
  }

  toolActivity(activity: ToolActivity): void {
    const { call, approvalRequestId } = activity;
    if (activity.phase === 'started') {
      this.closeItems();
      const itemId = mcpCallItemId(this.frame.id, call.id);
      const shown = this.shownCalls.get(itemId);
      if (shown) {
        this.mcpCalls.set(call.id, { itemId, outputIndex: shown.outputIndex });
        return;
      }
      const item = { itemId, outputIndex: this.outputs++ };
      this.mcpCalls.set(call.id, item);
      const where = { item_id: item.itemId, output_index: item.outputIndex };
      this.emit('response.output_item.added', { output_index: item.outputIndex, item: mcpCallItem(item.itemId, call, undefined, approvalRequestId) });
      this.emit('response.mcp_call.in_progress', where);
      if (call.function.arguments !== '') this.emit('response.mcp_call_arguments.delta', { ...where, delta: call.function.arguments });
      this.emit('response.mcp_call_arguments.done', { ...where, arguments: call.function.arguments });
      return;
    }
    const item = this.mcpCalls.get(call.id);
    if (!item || this.shownCalls.get(item.itemId)?.done) return;
    const done = mcpCallItem(item.itemId, call, activity.result, approvalRequestId);
    this.emit(done.status === 'failed' ? 'response.mcp_call.failed' : 'response.mcp_call.completed', { item_id: item.itemId, output_index: item.outputIndex });
    this.itemDone(item.outputIndex, done);
  }

  /** The calls the turn ended holding for the user's approval: each an `mcp_approval_request` item, added and done. */
  approvalRequests(requests: readonly ApprovalRequest[]): void {
    this.closeItems();
    for (const request of requests) {
      const outputIndex = this.outputs++;
      this.emit('response.output_item.added', { output_index: outputIndex, item: approvalRequestItem(request) });
      this.itemDone(outputIndex, approvalRequestItem(request));
    }
  }

  toolCall(delta: ToolCallDelta): void {
    let call = this.calls.get(delta.index);
    if (!call) {
      this.closeItems();
      call = { itemId: newItemId('fc'), outputIndex: this.outputs++, id: delta.id ?? '', name: delta.function?.name ?? '', arguments: '' };
      this.calls.set(delta.index, call);
      this.emit('response.output_item.added', { output_index: call.outputIndex, item: functionCallItem(call.itemId, call, 'in_progress') });
    }
    const piece = delta.function?.arguments ?? '';
    if (piece === '') return;
    call.arguments += piece;
    this.emit('response.function_call_arguments.delta', { item_id: call.itemId, output_index: call.outputIndex, delta: piece });
  }

  /**
   * Closes the items of a turn that ended and returns the response it made (`completed`,
   * `incomplete` at a length limit, or `failed` when the LLM call failed), as its text, to be
   * stored before `end` sends it.
   */
  close(outcome: TurnOutcome): ResponseBodyText {
    this.closeItems();
    if (outcome.failure) return this.failedBody(outcome.failure.message);
    // A turn with nothing else to show has an empty message (as outputItems makes it).
    if (this.messages.length === 0 && outcome.toolCalls.length === 0 && outcome.approvalRequests.length === 0) {
      this.openMessage();
      this.closeMessage();
    }
    const byCallId = new Map([...this.calls.values()].map((call) => [call.id, call]));
    const callOf = (index: number) => byCallId.get(outcome.toolCalls[index]!.id) ?? this.calls.get(index);
    for (const [index, final] of outcome.toolCalls.entries()) {
      const call = callOf(index);
      if (!call) continue;
      const item = functionCallItem(call.itemId, { id: final.id, ...final.function }, 'completed');
      this.emit('response.function_call_arguments.done', { item_id: call.itemId, output_index: call.outputIndex, name: final.function.name, arguments: final.function.arguments });
      this.itemDone(call.outputIndex, item);
    }
    const ids: OutputIds = {
      message: (index) => this.messages[index]?.itemId ?? newItemId('msg'),
      reasoning: (index) => this.reasonings[index]?.itemId ?? newItemId('rs'),
      mcpCall: (callId) => this.mcpCalls.get(callId)?.itemId ?? newItemId('mcp'),
      call: (index) => callOf(index)?.itemId ?? newItemId('fc'),
    };
    return bodyTextOf(endedResponse(this.frame, outcome, outputItems(outcome, ids)));
  }

  /**
   * The last event, `response.completed`, `response.incomplete` or `response.failed` as the response says (its text
   * as it was stored), and the end of the stream. A cancelled response has no event of its own
   * in OpenAI's schema: its stream just ends.
   */
  end(response: ResponseBodyText): void {
    if (response.status === 'completed' || response.status === 'incomplete' || response.status === 'failed') {
      const type = `response.${response.status}`;
      this.emitJson(type, (sequence) => `{"type":"${type}","sequence_number":${sequence},"response":${response.json}}`);
    }
    this.sink.end();
  }

  /** Closes the items of a turn that failed and returns the response: `failed`, its output what finished before the failure. */
  failure(message: string): ResponseBodyText {
    this.closeItems();
    return this.failedBody(message);
  }

  private failedBody(message: string): ResponseBodyText {
    return bodyTextOf(responseBody(this.frame, { status: 'failed', output: byOutputIndex(this.finished), error: { code: 'server_error', message } }));
  }

  private openMessage(): StreamedMessage {
    const last = this.messages.at(-1);
    if (last?.open) return last;
    const message = streamedItem(newItemId('msg'), this.outputs++);
    this.messages.push(message);
    this.emit('response.output_item.added', { output_index: message.outputIndex, item: messageItem(message.itemId, '', 'in_progress') });
    this.emit('response.content_part.added', { item_id: message.itemId, output_index: message.outputIndex, content_index: 0, part: outputTextPart('') });
    return message;
  }

  /** Closes the open reasoning and message items. */
  private closeItems(): void {
    this.closeReasoning();
    this.closeMessage();
  }

  private closeReasoning(): void {
    const item = this.reasonings.at(-1);
    if (!item?.open) return;
    item.open = false;
    const where = { item_id: item.itemId, output_index: item.outputIndex, content_index: 0 };
    this.emit('response.reasoning_text.done', { ...where, text: item.text });
    this.emit('response.content_part.done', { ...where, part: reasoningTextPart(item.text) });
    this.itemDone(item.outputIndex, reasoningItem(item.itemId, item.text, 'completed'));
  }

  private closeMessage(): void {
    const message = this.messages.at(-1);
    if (!message?.open) return;
    message.open = false;
    const where = { item_id: message.itemId, output_index: message.outputIndex, content_index: 0 };
    this.emit('response.output_text.done', { ...where, text: message.text, logprobs: [] });
    this.emit('response.content_part.done', { ...where, part: outputTextPart(message.text) });
    this.itemDone(message.outputIndex, messageItem(message.itemId, message.text, 'completed'));
  }

  private itemDone(outputIndex: number, item: Record<string, unknown>): void {
    this.finished.set(outputIndex, item);
    this.emit('response.output_item.done', { output_index: outputIndex, item });
  }

  private emit(type: string, fields: Record<string, unknown>): void {
    this.emitJson(type, (sequence) => JSON.stringify({ type, sequence_number: sequence, ...fields }));
  }

  /**
   * A text or reasoning delta, the event a stream sends most: the JSON text `emit` makes of
   * `{ item_id, output_index, content_index: 0, delta }` and what `tail` closes it with, written
   * around the piece without building and serialising an object each.
   */
  private emitDelta(type: string, item: StreamedMessage, piece: string, tail: string): void {
    this.emitJson(type, (sequence) => `{"type":"${type}","sequence_number":${sequence}${item.deltaFields}${JSON.stringify(piece)}${tail}`);
  }

  /** Sends the next event, its JSON text made with its sequence number. */
  private emitJson(type: string, json: (sequence: number) => string): void {
    const sequence = this.sequence++;
    this.sink.event(type, json(sequence), sequence);
  }
}

/** A stored event's fields the restored stream reads. */
type StoredEvent = { type: string; output_index?: number; item_id?: string; delta?: string; item?: Record<string, unknown> & { id?: unknown; type?: unknown } };

/** A message or reasoning item that begins streaming, with its delta events' constant fields serialised once. */
function streamedItem(itemId: string, outputIndex: number): StreamedMessage {
  return { itemId, outputIndex, text: '', open: true, deltaFields: `,"item_id":${JSON.stringify(itemId)},"output_index":${outputIndex},"content_index":0,"delta":` };
}

/** Output items in the order of their output indexes. */
function byOutputIndex(items: ReadonlyMap<number, Record<string, unknown>>): Array<Record<string, unknown>> {
  return [...items.entries()].sort(([a], [b]) => a - b).map(([, item]) => item);
}
