import winston from 'winston';
import { contextOfSession } from '../http/request-context.js';

/** How log lines are written (`log.format`): `text` for people, `json` (one object a line) for a log pipeline. */
export type LogFormat = 'text' | 'json';

/** The log's settings (`log.*`). */
export type LogSettings = { level: string; format?: LogFormat };

/**
 * The service's one log sink: one line per entry on standard output, errors with their stack;
 * `label` names the process (e.g. `worker 2`).
 */
export function createLogger(settings: LogSettings, label?: string): winston.Logger {
  return winston.createLogger({
    level: settings.level,
    format: logLineFormat(settings.format ?? 'text', label),
    transports: [new winston.transports.Console()],
  });
}

/**
 * How an entry becomes its line. A line about a session whose turn runs for a request carries
 * that request's ids (gateway/http/request-context.ts); what the entry names itself wins.
 * - text: `<time> <level> [<label>] <message> {"requestId":…,"clientRequestId":…,"sessionId":…,"userId":…,"trace_id":…,"span_id":…,…}`, the stack on the lines below;
 * - json: `{"timestamp","level","message","process","requestId","clientRequestId","sessionId","userId","trace_id","span_id",…,"stack"}` on one line.
 * `trace_id` and `span_id` (tracing on) are the request span's.
 */
export function logLineFormat(format: LogFormat, label?: string): winston.Logform.Format {
  const line = format === 'json' ? jsonLine : textLine;
  return winston.format.combine(
    winston.format.timestamp(),
    winston.format.errors({ stack: true }),
    requestIds(),
    winston.format.printf((info) => line(entryOf(info), label)),
  );
}

/** Adds the ids of the request a session's turn runs for to a line about the session, unless the entry names another request or user. */
const requestIds = winston.format((info) => {
  const context = typeof info.sessionId === 'string' ? contextOfSession(info.sessionId) : undefined;
  if (!context || (info.requestId !== undefined && info.requestId !== context.requestId)) return info;
  if (info.userId !== undefined && info.userId !== context.userId) return info;
  info.requestId = context.requestId;
  if (context.clientRequestId !== undefined) info.clientRequestId ??= context.clientRequestId;
  if (context.userId !== undefined) info.userId ??= context.userId;
  if (context.traceId !== undefined) {
    info.traceId ??= context.traceId;
    info.spanId ??= context.spanId;
  }
  return info;
});

/** An entry's parts: the ids lead its details. */
type Entry = { timestamp: unknown; level: string; message: unknown; stack: unknown; details: Record<string, unknown> };

function entryOf(info: winston.Logform.TransformableInfo): Entry {
  const { timestamp, level, message, stack, requestId, clientRequestId, sessionId, userId, traceId, spanId, ...rest } = info;
  const details: Record<string, unknown> = {};
  if (requestId !== undefined) details.requestId = requestId;
  if (clientRequestId !== undefined) details.clientRequestId = clientRequestId;
  if (sessionId !== undefined) details.sessionId = sessionId;
  if (userId !== undefined) details.userId = userId;
  // The names OpenTelemetry's log data model and the log stores' trace links (Loki, Elasticsearch) use.
  if (traceId !== undefined) details.trace_id = traceId;
  if (spanId !== undefined) details.span_id = spanId;
  return { timestamp, level, message, stack, details: Object.assign(details, rest) };
}

function textLine({ timestamp, level, message, stack, details }: Entry, label: string | undefined): string {
  const extra = Object.keys(details).length > 0 ? ` ${toJson(details)}` : '';
  const origin = label ? ` [${label}]` : '';
  return `${timestamp} ${level}${origin} ${message}${extra}${stack ? `\n${stack}` : ''}`;
}

function jsonLine({ timestamp, level, message, stack, details }: Entry, label: string | undefined): string {
  return toJson({ timestamp, level, message, ...(label ? { process: label } : {}), ...details, ...(stack ? { stack } : {}) });
}

/** JSON that a detail cannot break: errors as their message, big integers as text, a cycle as a note. */
function toJson(value: Record<string, unknown>): string {
  try {
    return JSON.stringify(value, (_key, field: unknown) => {
      if (typeof field === 'bigint') return field.toString();
      if (field instanceof Error) return field.message;
      return field;
    });
  } catch (error) {
    const { timestamp, level, message } = value;
    return JSON.stringify({ timestamp, level, message, logError: `details not written: ${(error as Error).message}` });
  }
}
