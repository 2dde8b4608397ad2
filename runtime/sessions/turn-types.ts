import type { TracedSpan } from '../observability/tracing.js';
import type { ChatMessage, GenerationParams, ToolCall, ToolDefinition, Usage } from '../chat-types.js';
import type { ToolCallDelta } from '../llm/llm-client.js';
import type { NewResponseRecord, SessionRecord } from '../ports.js';
import type { ApprovalWords } from '../tools/approval-words.js';
import type { ApprovalAnswer, ApprovalDecision, ApprovalRequest } from '../tools/tool-approvals.js';
import type { ToolCallResult } from '../tools/tool-runner.js';
import type { Turn } from './conversation-history.js';

/** The prefix the specification gives a failed LLM call's reply. */
export const LLM_FAILURE_PREFIX = 'Error: An error occurred during async LLM call: ';

/**
 * The stored role of a reply that is a failure's text: kept in the transcript as the client
 * saw it, and, like every role but system, user and assistant, never placed in a context.
 */
export const FAILED_REPLY_ROLE = 'assistant_error';

/**
 * The stored role of a private step's text: what an agent state said before it handed over to
 * another agent state (see the graph's `show_output`). Kept in the transcript, out of the reply
 * and, like every role but system, user and assistant, never placed in a later turn's context.
 */
export const PRIVATE_STEP_ROLE = 'assistant_private';

/**
 * The stored role of an LLM round's reasoning (what the model thought before it answered or
 * called tools): kept in the transcript, shown to the client, and, like every role but system,
 * user and assistant, never placed in a later turn's context.
 */
export const REASONING_ROLE = 'assistant_reasoning';

/** One user turn, as the gateway hands it over. */
export type TurnRequest = {
  userId: string;
  /** The id of the HTTP request the turn runs for: the log lines about the session while it runs name it. */
  requestId?: string;
  /** The span the turn's span is a child of (tracing on: the HTTP request's). */
  traceParent?: TracedSpan;
  /** The session the client named (X-Session-ID or session_id), if any. */
  sessionHint?: string;
  /**
   * The client says this request is another attempt at one that failed (the openai SDKs'
   * `X-Stainless-Retry-Count` above 0): a first turn naming no session then continues the
   * session its earlier attempt began, if that attempt stored the same message and was never
   * answered (its worker died, or its client gave up), instead of starting a second one.
   */
  retried?: boolean;
  /**
   * The turn has its own way to be finished if its process dies (an Idempotency-Key's request
   * sent again, a background response's takeover): the sweep of abandoned turns leaves it.
   */
  hasOwnResume?: boolean;
  /**
   * The history hash the named session must be at for this turn (the Responses API continuing
   * a session's newest response). Checked under the session's lock: of two turns continuing
   * the same point, the second fails with SESSION_CONFLICT before anything is stored.
   */
  continuesAt?: string;
  messages: ChatMessage[];
  params: GenerationParams;
  /** Tools the client runs itself: their calls are returned to it, not run here. */
  clientTools?: ToolDefinition[];
  /**
   * Explicit answers to the session's pending approval requests (the Responses API's
   * `mcp_approval_response` items). Each must name a request pending in the session, or the
   * turn is refused (400) before anything is stored. Without them, the user's message answers.
   */
  approvals?: ApprovalAnswer[];
  /**
   * The Responses API's record of the turn, made from how it ended (undefined: none to keep).
   * It is stored in the same write as the turn's end, so it costs no round trip of its own;
   * a turn that ends unanswered stores none (but see `failedResponseRecord`).
   */
  responseRecord?: (outcome: TurnOutcome) => NewResponseRecord | undefined;
  /**
   * The record of a turn whose failure is answered as an error (`llm.failure_mode: http`, or a
   * conversation too long for the model's window), made from how it ended (`failure` set), or
   * undefined: none to keep. Stored as `responseRecord` is, before the error is thrown: a
   * Responses API stream that had begun gave the client the response's id, which must stay readable.
   */
  failedResponseRecord?: (outcome: TurnOutcome) => NewResponseRecord | undefined;
};

/** Where a turn's answer goes while it is produced. */
export type TurnHandlers = {
  /** Aborts the turn: the LLM request or tool call in flight is cancelled. */
  signal: AbortSignal;
  /** Called once the session is known and the user's message is stored, before any answer. */
  onSessionReady?: (sessionId: string) => void;
  /** Streams the answer: each content piece as it arrives. */
  onContent?: (piece: string) => void;
  /**
   * Streams the model's reasoning as it arrives (with `onContent`). A round's reasoning after an
   * earlier round's starts with the round separator, as its text does.
   */
  onReasoning?: (piece: string) => void;
  /** Streams tool-call pieces of calls the client runs itself. */
  onToolCallDelta?: (delta: ToolCallDelta) => void;
  /** Called every `heartbeatMs` while tools run, so a quiet stream stays open. */
  onHeartbeat?: () => void;
  /** Called as each of the service's own tool calls starts, and again when it finished. */
  onToolActivity?: (activity: ToolActivity) => void;
  /**
   * Shows the calls the turn ended holding for the user's approval (the Responses API's
   * `mcp_approval_request` items). Without it, a streamed turn streams the question that
   * asks for them as the end of its content.
   */
  onApprovalRequests?: (requests: ApprovalRequest[]) => void;
  /**
   * Called before each step of the turn is stored (see TurnJournal), and waited for: a
   * background response stores the events it showed so far first, so that every stored step
   * was shown to its readers.
   */
  beforeStep?: () => Promise<void>;
  /**
   * The turn continues one whose readers were shown its stored steps already (a background
   * response taken over from a process that died): the text of its stored LLM rounds is not
   * streamed again. Tool activity is, and the reader drops what it showed.
   */
  stepsShown?: boolean;
  /**
   * The turn finishes one whose process died (the sweep of abandoned turns): cancelled (this
   * process stops), it is left abandoned as it was found, for the next process to finish, not
   * marked as a turn its client gave up.
   */
  leftAbandonedOnCancel?: boolean;
};

/**
 * One of the service's own tool calls, starting or finished; `approvalRequestId` names the
 * approval request of a call the user approved.
 */
export type ToolActivity =
  | { phase: 'started'; call: ToolCall; approvalRequestId?: string }
  | { phase: 'finished'; call: ToolCall; result: ToolCallResult; approvalRequestId?: string };

/** Between the texts (and the reasoning) of the LLM rounds of one turn, before and after tool calls. */
export const ROUND_SEPARATOR = '\n\n';

/**
 * What a turn did, in order: the reasoning and the text of each LLM round that had any, and
 * each call of the service's own tools with its result. A text after an earlier one starts
 * with the round separator, so the texts joined are the turn's `content`; reasoning likewise,
 * joined the turn's `reasoning`.
 */
export type TurnStep =
  | { type: 'reasoning'; text: string }
  | { type: 'text'; text: string }
  | { type: 'tool'; call: ToolCall; result: ToolCallResult; approvalRequestId?: string };

/** How a turn ended. */
export type TurnOutcome = {
  sessionId: string;
  content: string;
  /** The model's reasoning in the rounds that reach the reply, joined by the round separator ('' when it gave none). */
  reasoning: string;
  toolCalls: ToolCall[];
  finishReason: string;
  usage: Usage | null;
  /** Why the turn failed; `code` is `context_length_exceeded` when the conversation does not fit the model's window. */
  failure: { source: 'llm' | 'tool'; message: string; code?: string } | null;
  cancelled: boolean;
  /** The session's history hash after the turn: where a later turn continues from it (the Responses API). */
  historyHash: string;
  /**
   * The completed LLM rounds' texts and the service's tool calls, in order (the Responses API's
   * output items), the approved calls the turn began with first.
   */
  steps: TurnStep[];
  /**
   * Calls of the service's tools the turn ended holding for the user's approval: the session
   * waits on them, and `content` ends with the question that asks for them.
   */
  approvalRequests: ApprovalRequest[];
};

/** The supervisor's settings. */
export type SupervisorSettings = {
  systemPrompt: string;
  shortTermTurns: number;
  maxToolRounds: number;
  /** Most hand-offs (`transfer_to_` calls) in one turn. */
  maxHandoffs: number;
  cacheSize: number;
  idleMs: number;
  turnWaitMs: number;
  /** How long a turn waits for a write to commit before it answers anyway (the write goes on). */
  writeWaitMs: number;
  /** Interval of heartbeats while tools run. */
  heartbeatMs: number;
  /**
   * How a failed LLM call is answered: `reply`, the specification's error text as the reply;
   * `http`, an error the client can retry (the turn stays unanswered, so a retry is not stored twice).
   */
  failureMode: 'reply' | 'http';
  /** The words of a message that approve or refuse pending approval requests, normalised. */
  approvalWords: ApprovalWords;
};

/**
 * The session's pending approval requests, decided by this turn: the plan's dialogue ends with
 * the assistant message that made the calls; their results (an approved call's, or a denial)
 * follow it, then `after` (what goes on: the user's message unless it only answered).
 */
export type PlannedApprovals = {
  decisions: ApprovalDecision[];
  after: ChatMessage[];
  /**
   * An earlier attempt decided them and its process died before their results were stored: an
   * approved call runs again only if its tool may (`ToolRunner.isRepeatable`); otherwise its
   * result says its outcome is unknown.
   */
  resumed?: boolean;
};

/** How a resolved turn treats the client's messages. */
export type TurnPlan = {
  session: SessionRecord;
  /** Messages to store before answering, in order. */
  toStore: Turn[];
  /** The dialogue placed after the system prompt and memories. */
  dialogue: ChatMessage[];
  /** The conversation hash before this turn's new turns. */
  baseHash: string;
  /** The turns that follow `baseHash` before the reply (stored now or by an earlier attempt). */
  hashed: Turn[];
  /** True when the conversation is brand new or forked (no stored turns to continue). */
  isNew: boolean;
  /** The session's id was made for this turn: nothing of it is stored, and the turn's first write creates it (`SessionStore.start`). */
  starts?: true;
  /** The session's last stored turns before this turn, when known (see CachedActor). */
  recent?: Turn[];
  /** The session lease's generation this turn runs under (0 without leases). */
  generation: number;
  /** True when an earlier attempt of this turn stored its messages (the same request sent again): its stored steps are continued. */
  continues: boolean;
  /** The steps that attempt stored, when they were read already (an abandoned turn's, to decide whether to finish it). */
  steps?: Map<string, string>;
  /** The session's pending approval requests this turn decides, if it waited on any. */
  approvals?: PlannedApprovals;
  /**
   * The turn the session's transcript ends with, left unanswered by a process that died: run
   * first (continued from its stored steps), then this turn is planned again.
   */
  abandoned?: TurnPlan;
};
