import { Client, Pool, type Dispatcher } from 'undici';
import { summarise, type LatencySummary } from './latency-stats.js';
import type { ResponsesBody } from './responses-body.js';

/** One timed request: durations in ms from sending it; throws when the response is wrong. */
export type Sample = { totalMs: number; firstPieceMs?: number };

/** Sends request number `seq` on behalf of client `worker` over `dispatcher` and checks the answer. */
export type Exchange = (dispatcher: Dispatcher, worker: number, seq: number) => Promise<Sample>;

/** A closed-loop load: `connections` clients, each sending its next request once the previous one is answered. */
export type LoadOptions = {
  origin: string;
  connections: number;
  /**
   * Each client has a keep-alive connection of its own (default), as a client per session
   * does; when shared, the clients' requests go over one pool of `connections` connections,
   * each over whichever is free, as an application server's do when it talks for many users.
   */
  sharedConnections?: boolean;
  /** Requests sent (at the same concurrency) before measuring; not counted. */
  warmup: number;
  durationMs: number;
  /** When set, measure this many requests instead of a duration. */
  requests?: number;
  exchange: Exchange;
  /** Called when the measured window opens, after the warm-up. */
  onMeasureStart?: () => void;
  /** Called when the measured window closes (before the requests still in flight are answered). */
  onMeasureEnd?: () => void;
};

/** What one measured load produced. */
export type LoadResult = {
  ok: number;
  errors: number;
  /** The first distinct error messages. */
  errorSamples: string[];
  elapsedMs: number;
  rps: number;
  latency: LatencySummary;
  /** Streaming only: time to the first content piece. */
  firstPiece?: LatencySummary;
  /** The measured window on the monotonic clock, in µs (V8 CPU profiles use the same clock): from the first phase's start to the last one's end. */
  windowUs: [number, number];
};

/** One measured phase of a load, its durations not yet summarised: a cell may be measured in several (see `summariseLoad`). */
export type LoadPhase = {
  /** The requests answered in the window, whenever they were sent: the phase's throughput. */
  answers: number;
  /**
   * The duration, in ms, of each request both sent and answered in the window: one sent during
   * the warm-up and answered late belongs to the warm-up (the slowest of a warm-up's first
   * burst, new connections all at once, were answered in the window some 0.6 to 1.5 s later
   * and made up the tail of PGlite's cells at 128 connections).
   */
  totals: number[];
  /** Streaming only: each request's time to its first content piece. */
  firstPieces: number[];
  errors: number;
  errorSamples: string[];
  elapsedMs: number;
  /** The phase on the monotonic clock, in µs. */
  windowUs: [number, number];
};

const MAX_ERRORS = 1_000;
const MAX_ERROR_SAMPLES = 5;

/** Runs the warm-up, then the measured phase, over `connections` keep-alive connections. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  return summariseLoad([await runLoadPhase(options)]);
}

/**
 * As `runLoad`, its measured phase not yet summarised. The clients go on from the warm-up into
 * the measured window without a pause, which opens at the warm-up's last answer; with a
 * duration it closes at the deadline, and the requests still in flight then are answered
 * outside it. So the window sees the service at its full concurrency throughout: no ramp at
 * its start and no tail at its end, where fewer requests are in flight and the slower API
 * would spend longer (at 128 connections a request takes some 150 ms, a tenth of a 1.5 s
 * window). With a number of requests, the window holds exactly those, and closes once the
 * last is answered.
 */
export async function runLoadPhase(options: LoadOptions): Promise<LoadPhase> {
  const dispatchers = clientDispatchers(options);
  const totals: number[] = [];
  const firstPieces: number[] = [];
  const errorSamples = new Set<string>();
  let errors = 0;
  let sent = 0;
  let answered = 0;
  let answers = 0;
  /** The number of the first request sent once the window opened. */
  let firstInWindow = Number.POSITIVE_INFINITY;
  let opened: { ms: number; us: number } | undefined;
  let closed: { ms: number; us: number } | undefined;
  let deadline: NodeJS.Timeout | undefined;
  const now = () => ({ ms: performance.now(), us: monotonicUs() });
  const open = () => {
    options.onMeasureStart?.();
    opened = now();
    firstInWindow = sent;
    if (options.requests === undefined) deadline = setTimeout(close, options.durationMs);
  };
  const close = () => {
    if (closed) return;
    closed = now();
    options.onMeasureEnd?.();
  };
  const measuring = () => opened !== undefined && closed === undefined;
  // Measured requests are those after the warm-up's; with a duration there is no last one.
  const lastRequest = options.requests === undefined ? Number.POSITIVE_INFINITY : options.warmup + options.requests;
  try {
    if (options.warmup === 0) open();
    await runClients(
      options,
      dispatchers,
      () => closed === undefined && errors < MAX_ERRORS && sent < lastRequest,
      () => sent++,
      (sample, seq) => {
        if (!measuring()) return;
        answers += 1;
        if (seq < firstInWindow) return;
        totals.push(sample.totalMs);
        if (sample.firstPieceMs !== undefined) firstPieces.push(sample.firstPieceMs);
      },
      (error) => {
        if (!measuring()) return;
        errors += 1;
        if (errorSamples.size < MAX_ERROR_SAMPLES) errorSamples.add(error instanceof Error ? error.message : String(error));
      },
      () => {
        answered += 1;
        if (opened === undefined && answered >= options.warmup) open();
      },
    );
    close();
    return { answers, totals, firstPieces, errors, errorSamples: [...errorSamples], elapsedMs: closed!.ms - opened!.ms, windowUs: [opened!.us, closed!.us] };
  } finally {
    clearTimeout(deadline);
    await Promise.all([...new Set(dispatchers)].map((dispatcher) => dispatcher.destroy()));
  }
}

/** The phases of one load as one result: their requests and their time added together, their durations summarised together. */
export function summariseLoad(phases: LoadPhase[]): LoadResult {
  const totals = phases.flatMap((phase) => phase.totals);
  const firstPieces = phases.flatMap((phase) => phase.firstPieces);
  const elapsedMs = phases.reduce((sum, phase) => sum + phase.elapsedMs, 0);
  const answers = phases.reduce((sum, phase) => sum + phase.answers, 0);
  return {
    ok: answers,
    errors: phases.reduce((sum, phase) => sum + phase.errors, 0),
    errorSamples: [...new Set(phases.flatMap((phase) => phase.errorSamples))].slice(0, MAX_ERROR_SAMPLES),
    elapsedMs,
    rps: answers / (elapsedMs / 1000),
    latency: summarise(totals),
    ...(firstPieces.length > 0 ? { firstPiece: summarise(firstPieces) } : {}),
    windowUs: [phases[0]!.windowUs[0], phases.at(-1)!.windowUs[1]],
  };
}

/** The dispatcher of each client: a connection of its own, or all one shared pool. */
function clientDispatchers(options: LoadOptions): Dispatcher[] {
  if (options.sharedConnections) {
    const pool = new Pool(options.origin, { connections: options.connections, pipelining: 1 });
    return Array.from({ length: options.connections }, () => pool);
  }
  return Array.from({ length: options.connections }, () => new Client(options.origin, { pipelining: 1 }));
}

/** The closed-loop clients: each sends its next request once its last is answered, while `goOn`. */
async function runClients(
  options: LoadOptions,
  dispatchers: Dispatcher[],
  goOn: () => boolean,
  next: () => number,
  onSample: (sample: Sample, seq: number) => void,
  onError: (error: unknown) => void,
  onAnswered: () => void,
): Promise<void> {
  const client = async (worker: number) => {
    while (goOn()) {
      const seq = next();
      try {
        onSample(await options.exchange(dispatchers[worker]!, worker, seq), seq);
      } catch (error) {
        onError(error);
      }
      onAnswered();
    }
  };
  await Promise.all(Array.from({ length: options.connections }, (_, worker) => client(worker)));
}

function monotonicUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** A POST of a JSON chat body answered by a chat completion whose message has content. */
export function jsonExchange(bodies: Buffer[], headersFor: (worker: number, seq: number) => Record<string, string>): Exchange {
  return async (dispatcher, worker, seq) => {
    const started = performance.now();
    const response = await dispatcher.request({ method: 'POST', path: '/v1/chat/completions', headers: headersFor(worker, seq), body: bodies[seq % bodies.length]! });
    const text = await response.body.text();
    const totalMs = performance.now() - started;
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}: ${text.slice(0, 200)}`);
    const content = (JSON.parse(text) as { choices?: { message?: { content?: unknown } }[] }).choices?.[0]?.message?.content;
    if (typeof content !== 'string' || content.length === 0) throw new Error(`no content in ${text.slice(0, 200)}`);
    return { totalMs };
  };
}

/** A streamed chat request: times the first non-empty content piece and the end of the stream, which must close with [DONE]. */
export function streamExchange(bodies: Buffer[], headersFor: (worker: number, seq: number) => Record<string, string>): Exchange {
  return async (dispatcher, worker, seq) => {
    const started = performance.now();
    const response = await dispatcher.request({ method: 'POST', path: '/v1/chat/completions', headers: headersFor(worker, seq), body: bodies[seq % bodies.length]! });
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}: ${(await response.body.text()).slice(0, 200)}`);
    response.body.setEncoding('utf8');
    let firstPieceMs: number | undefined;
    let done = false;
    await readSseFrames(response.body as AsyncIterable<string>, (frame) => {
      if (frame === 'data: [DONE]') done = true;
      // Frames are parsed only until the first piece, to keep the load generator light.
      else if (firstPieceMs === undefined && frame.startsWith('data: ') && hasContent(frame.slice(6))) firstPieceMs = performance.now() - started;
    });
    const totalMs = performance.now() - started;
    if (firstPieceMs === undefined) throw new Error('the stream carried no content');
    if (!done) throw new Error('the stream did not end with [DONE]');
    return { totalMs, firstPieceMs };
  };
}

/** Reads a body of server-sent events to its end, giving `onFrame` each frame (the text before a blank line). */
async function readSseFrames(body: AsyncIterable<string>, onFrame: (frame: string) => void): Promise<void> {
  let pending = '';
  for await (const chunk of body) {
    pending += chunk;
    let end: number;
    while ((end = pending.indexOf('\n\n')) >= 0) {
      onFrame(pending.slice(0, end));
      pending = pending.slice(end + 2);
    }
  }
}

function hasContent(data: string): boolean {
  const piece = (JSON.parse(data) as { choices?: { delta?: { content?: unknown } }[] }).choices?.[0]?.delta?.content;
  return typeof piece === 'string' && piece.length > 0;
}

/**
 * A POST of a Responses API body answered by a completed response (JSON). With `chain`, each
 * client continues its own previous response (`previous_response_id`, the `id` of its last
 * answer; none on its first turn), as a client of the Responses API keeps a conversation.
 */
export function responsesExchange(body: ResponsesBody, headersFor: (worker: number, seq: number) => Record<string, string>, chain: boolean): Exchange {
  const previous: (string | undefined)[] = [];
  return async (dispatcher, worker, seq) => {
    const started = performance.now();
    const response = await dispatcher.request({ method: 'POST', path: '/v1/responses', headers: headersFor(worker, seq), body: body(seq, previous[worker]) });
    const text = await response.body.text();
    const totalMs = performance.now() - started;
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}: ${text.slice(0, 200)}`);
    const answer = JSON.parse(text) as ResponseObject;
    const id = completedId(answer, text);
    if (typeof answer.output?.[0]?.content?.[0]?.text !== 'string' || answer.output[0].content[0].text.length === 0) throw new Error(`no output text in ${text.slice(0, 200)}`);
    if (chain) previous[worker] = id;
    return { totalMs };
  };
}

/**
 * A streamed Responses API request (chained as `responsesExchange` is): times the first
 * `response.output_text.delta` event and the end of the stream, which must have carried
 * `response.completed` with a completed response.
 */
export function responsesStreamExchange(body: ResponsesBody, headersFor: (worker: number, seq: number) => Record<string, string>, chain: boolean): Exchange {
  const previous: (string | undefined)[] = [];
  return async (dispatcher, worker, seq) => {
    const started = performance.now();
    const response = await dispatcher.request({ method: 'POST', path: '/v1/responses', headers: headersFor(worker, seq), body: body(seq, previous[worker]) });
    if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}: ${(await response.body.text()).slice(0, 200)}`);
    response.body.setEncoding('utf8');
    let firstPieceMs: number | undefined;
    let completed: string | undefined;
    let last = '';
    await readSseFrames(response.body as AsyncIterable<string>, (frame) => {
      last = frame;
      // Only the event names are read until the end, to keep the load generator light.
      if (firstPieceMs === undefined && frame.startsWith('event: response.output_text.delta\n')) firstPieceMs = performance.now() - started;
      else if (frame.startsWith('event: response.completed\n')) completed = frame.slice(frame.indexOf('\ndata: ') + 7);
    });
    const totalMs = performance.now() - started;
    if (completed === undefined) throw new Error(`the stream did not end with response.completed: ${last.slice(0, 200)}`);
    const id = completedId((JSON.parse(completed) as { response?: ResponseObject }).response ?? {}, completed);
    if (firstPieceMs === undefined) throw new Error('the stream carried no output text');
    if (chain) previous[worker] = id;
    return { totalMs, firstPieceMs };
  };
}

/** The parts of a response object the bench checks. */
type ResponseObject = { id?: unknown; status?: unknown; output?: { content?: { text?: unknown }[] }[] };

/** The id of a completed response; throws when it is not completed. */
function completedId(answer: ResponseObject, text: string): string {
  if (answer.status !== 'completed') throw new Error(`response status ${String(answer.status)}: ${text.slice(0, 200)}`);
  if (typeof answer.id !== 'string' || answer.id.length === 0) throw new Error(`no response id in ${text.slice(0, 200)}`);
  return answer.id;
}
