import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import pg from 'pg';
import { waitFor } from '../support/wait-for.js';
import { useWriterService } from './writer-service.js';

const LEASE_MS = 1_000;
/** A tool call the service is killed during takes this long. */
const SLOW_CALL_MS = 6_000;

/** Where a turn is killed: each step boundary of a turn with one tool round. */
type KillPoint = 'before the LLM call' | 'mid-stream' | 'after a tool started' | 'after a tool finished' | 'before the end is stored';

/** The fields of a response the checks read. */
type ResponseBody = { id: string; status: string; output: Array<{ type: string; content?: Array<{ text: string }> }>; error?: { message: string } };

/** The fields of a streamed event the checks read. */
type StreamedEvent = { type: string; sequence_number: number; delta?: string; item?: { type: string } };

/** The data of each event of a server-sent event stream. */
function sseEvents(text: string): unknown[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as unknown);
}

const serverUrl = process.env.TEST_DATABASE_URL;
const onServer = serverUrl ? describe : describe.skip;

/**
 * The kill matrix of issue 43: a worker killed at each step boundary of a turn that calls a
 * tool, the turn then sent again (chat completions, the Responses API with an
 * Idempotency-Key). Each case checks that the turn finished exactly once, that the tool that
 * may not run twice started at most once (the one declared idempotent may run again, with the
 * same idempotency key), that nothing was stored twice, and that the session did not branch.
 */
onServer(`turns killed at each step boundary${serverUrl ? '' : ' (skipped: needs TEST_DATABASE_URL)'}`, function () {
  this.timeout(120_000);
  const fixture = useWriterService({ serverUrl: serverUrl!, leaseMs: LEASE_MS, approval: false });
  const written = fixture.written;

  async function query<Row extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<Row[]> {
    const client = new pg.Client({ connectionString: fixture.databaseUrl });
    await client.connect();
    try {
      return (await client.query<Row>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  /** The user's stored turns, every session's, in order. */
  async function transcriptOf(userId: string): Promise<Array<{ session: string; row: string }>> {
    const rows = await query<{ session_id: string; role: string; message: string }>('select session_id, role, message from conversations where user_id = $1 order by id', [userId]);
    return rows.map((row) => ({ session: row.session_id, row: `${row.role}: ${row.message}` }));
  }

  /** What the LLM was asked this test, each request's last message's role. */
  const llmRounds = () => fixture.llm.requests.filter((request) => request.kind === 'chat').map((request) => request.body.messages!.at(-1)!.role);

  /**
   * Scripts a turn that calls `tool` once and then answers 'all done', slow at `point` the first
   * time (so the service can be killed there) and quick when asked again.
   */
  function scriptTurn(tool: string, point: KillPoint, nextTurn?: { message: string; answer: string }): void {
    const callTool = { toolCalls: [{ name: tool, arguments: { ms: point === 'after a tool started' ? SLOW_CALL_MS : 0 } }], content: 'let me save it' };
    const first =
      point === 'before the LLM call' ? { hang: true as const } : point === 'mid-stream' ? { ...callTool, pieceDelayMs: 1_000 } : callTool;
    const last =
      point === 'after a tool finished'
        ? { hang: true as const }
        : point === 'before the end is stored'
          ? { content: 'all done, saved', pieceDelayMs: 1_000 }
          : { content: 'all done, saved' };
    fixture.llm.script(
      ...(nextTurn ? [{ match: { lastUserIncludes: nextTurn.message }, reply: { content: nextTurn.answer } }] : []),
      { match: { hasToolResults: false }, reply: first, times: 1 },
      { match: { hasToolResults: false }, reply: callTool },
      { match: { hasToolResults: true }, reply: last, times: 1 },
      { match: { hasToolResults: true }, reply: { content: 'all done, saved' } },
    );
  }

  /**
   * Waits until the turn reached `point` (the tool `server` runs in it), then kills the service and
   * starts it again (with `env` added).
   */
  async function killAt(point: KillPoint, server: 'once' | 'again', writesBefore: number, env?: NodeJS.ProcessEnv): Promise<void> {
    if (point === 'before the LLM call') await fixture.llm.waitForRequest();
    // Its pieces come a second apart: 1.5 s after the request came, the stream is under way.
    if (point === 'mid-stream') await fixture.llm.waitForRequest().then(() => new Promise((resolve) => setTimeout(resolve, 1_500)));
    if (point === 'after a tool started') await waitFor(() => written(server).length > writesBefore, 'the tool call to start', 20_000);
    if (point === 'after a tool finished' || point === 'before the end is stored') await fixture.llm.waitForRequest((request) => request.body.messages!.at(-1)!.role === 'tool', 20_000);
    if (point === 'before the end is stored') await new Promise((resolve) => setTimeout(resolve, 1_500));
    await fixture.killAndRestart(env);
  }

  /** A chat completion of one user message in the session; `stream`ed, its answer is not read (the attempt the service is killed under). */
  async function chat(userId: string, sessionId: string, content: string, stream = false): Promise<{ status: number; content: string }> {
    const headers = { 'Content-Type': 'application/json', 'X-Session-ID': sessionId, 'X-User-ID': userId };
    const response = await fetch(`http://127.0.0.1:${fixture.port}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ messages: [{ role: 'user', content }], stream }) });
    if (stream) return { status: response.status, content: await response.text() };
    const body = (await response.json()) as { choices?: Array<{ message: { content: string } }>; error?: { message: string } };
    return { status: response.status, content: body.choices?.[0]?.message.content ?? body.error?.message ?? '' };
  }

  /**
   * A new user's chat turn 'save it' in a new session, calling the `server`'s slow-write tool,
   * killed at `point` (the service started again with `env` added); how many writes that
   * server had made before it.
   */
  async function chatKilledAt(
    point: KillPoint,
    options: { server?: 'once' | 'again'; nextTurn?: { message: string; answer: string }; env?: NodeJS.ProcessEnv } = {},
  ): Promise<{ userId: string; sessionId: string; writes: number }> {
    const server = options.server ?? 'once';
    const userId = `user-${randomUUID()}`;
    const sessionId = randomUUID();
    scriptTurn(`${server}__slow-write`, point, options.nextTurn);
    const writes = written(server).length;
    const first = chat(userId, sessionId, 'save it', true).catch(() => undefined);
    await killAt(point, server, writes, options.env);
    await first;
    return { userId, sessionId, writes };
  }

  /** The checks every case makes on the user's transcript: one session, the message once, the tool's result once, the answer once, last. */
  async function expectStoredOnce(userId: string, message: string): Promise<Array<{ session: string; row: string }>> {
    const stored = await transcriptOf(userId);
    expect(new Set(stored.map((entry) => entry.session)).size, 'sessions (no branch)').to.equal(1);
    const rows = stored.map((entry) => entry.row);
    expect(rows.filter((row) => row === `user: ${message}`), 'the message').to.have.length(1);
    expect(rows.filter((row) => row.startsWith('tool: ')), 'the tool result').to.have.length(1);
    expect(rows.filter((row) => row.startsWith('assistant: ')), 'the answer').to.deep.equal(['assistant: let me save it\n\nall done, saved']);
    expect(rows.at(-1)).to.equal('assistant: let me save it\n\nall done, saved');
    return stored;
  }

  const points: KillPoint[] = ['before the LLM call', 'mid-stream', 'after a tool started', 'after a tool finished', 'before the end is stored'];

  describe('chat completions, the request sent again', () => {
    for (const point of points) {
      it(`killed ${point}: finished once, the tool that may not run twice started at most once`, async () => {
        const { userId, sessionId, writes } = await chatKilledAt(point);
        const retried = await chat(userId, sessionId, 'save it');
        expect(retried).to.deep.equal({ status: 200, content: 'let me save it\n\nall done, saved' });
        const started = written('once').length - writes;
        expect(started, 'the tool started').to.equal(1);
        const stored = await expectStoredOnce(userId, 'save it');
        const result = stored.find((entry) => entry.row.startsWith('tool: '))!.row;
        // Killed while it ran, its outcome is unknown: the model is told so, and it is not run again.
        if (point === 'after a tool started') expect(result).to.include('is unknown');
        else expect(result).to.include('written');
        // A round that completed is not asked again: killed after the tool finished, the LLM was asked for the tool round once.
        if (point === 'after a tool finished' || point === 'before the end is stored') {
          expect(llmRounds().filter((role) => role === 'user'), 'the tool round asked').to.have.length(1);
        }
      });
    }

    it('killed after a tool that may run twice started: it runs again with the same idempotency key', async () => {
      const { userId, sessionId, writes } = await chatKilledAt('after a tool started', { server: 'again' });
      const retried = await chat(userId, sessionId, 'save it');
      expect(retried.status).to.equal(200);
      const keys = written('again').slice(writes);
      expect(keys, 'the call ran twice').to.have.length(2);
      expect(keys[1]).to.equal(keys[0]);
      const stored = await expectStoredOnce(userId, 'save it');
      expect(stored.find((entry) => entry.row.startsWith('tool: '))!.row).to.include('written');
    });
  });

  /** The kill points after the turn stored a step (its tool round): the turns with effects to finish. */
  const withSteps: KillPoint[] = ['after a tool started', 'after a tool finished', 'before the end is stored'];

  describe('chat completions, the next message instead of the same one', () => {
    for (const point of points) {
      const finished = withSteps.includes(point);
      const outcome = finished ? 'the turn is finished first, once, and the next turn sees its answer' : 'the turn had no effect: its message stays unanswered and the next turn goes on after it';
      it(`killed ${point}: ${outcome}`, async () => {
        const { userId, sessionId, writes } = await chatKilledAt(point, { nextTurn: { message: 'thanks', answer: 'you are welcome' } });
        const next = await chat(userId, sessionId, 'thanks');
        expect(next).to.deep.equal({ status: 200, content: 'you are welcome' });
        const stored = await transcriptOf(userId);
        expect(new Set(stored.map((entry) => entry.session)).size, 'sessions (no branch)').to.equal(1);
        const rows = stored.map((entry) => entry.row);
        const asked = fixture.llm.requests.filter((request) => request.kind === 'chat').at(-1)!.body.messages!.map((message) => `${message.role}: ${String(message.content)}`);
        if (!finished) {
          expect(written('once').length - writes, 'the tool started').to.equal(0);
          expect(rows).to.deep.equal(['user: save it', 'user: thanks', 'assistant: you are welcome']);
          expect(asked.at(-1)).to.equal('user: thanks');
          return;
        }
        expect(written('once').length - writes, 'the tool started').to.equal(1);
        expect(rows.filter((row) => row.startsWith('user: ')), 'the messages').to.deep.equal(['user: save it', 'user: thanks']);
        expect(rows.filter((row) => row.startsWith('tool: ')), 'the tool result').to.have.length(1);
        expect(rows.filter((row) => row.startsWith('assistant: ')), 'the answers').to.deep.equal(['assistant: let me save it\n\nall done, saved', 'assistant: you are welcome']);
        expect(rows.indexOf('assistant: let me save it\n\nall done, saved'), 'the first answer before the next message').to.be.below(rows.indexOf('user: thanks'));
        if (point === 'after a tool started') expect(rows.find((row) => row.startsWith('tool: '))).to.include('is unknown');
        // The next turn's context held the first turn's answer.
        expect(asked.slice(-3)).to.deep.equal(['user: save it', 'assistant: let me save it\n\nall done, saved', 'user: thanks']);
      });
    }
  });

  describe('chat completions, nothing sent again: finished by the process that finds it abandoned', () => {
    /** Abandoned after 2 s (a minute by default), so the restarted service finishes it. */
    const QUIET_MS = 2_000;
    const quickly = { SESSIONS_ABANDONED_AFTER_MS: String(QUIET_MS) };
    // A turn that stored a step (its tool round) is finished; one killed before has no effect to finish.
    for (const point of withSteps) {
      it(`killed ${point}: finished once in its session, the tool started once`, async () => {
        const { userId, sessionId, writes } = await chatKilledAt(point, { env: quickly });
        const answer = 'assistant: let me save it\n\nall done, saved';
        const stored = await waitFor(async () => {
          const rows = await transcriptOf(userId);
          return rows.some((entry) => entry.row === answer) ? rows : undefined;
        }, 'the turn finished', 20_000);
        expect(written('once').length - writes, 'the tool started').to.equal(1);
        expect(new Set(stored.map((entry) => entry.session)), 'its session').to.deep.equal(new Set([sessionId]));
        const rows = stored.map((entry) => entry.row);
        expect(rows.filter((row) => row.startsWith('user: ')), 'the message').to.deep.equal(['user: save it']);
        expect(rows.filter((row) => row.startsWith('tool: ')), 'the tool result').to.have.length(1);
        expect(rows.filter((row) => row.startsWith('assistant')), 'the answer, last').to.deep.equal([answer]);
        expect(rows.at(-1)).to.equal(answer);
        if (point === 'after a tool started') expect(rows.find((row) => row.startsWith('tool: '))).to.include('is unknown');
        await waitFor(async () => (await query('select 1 from turn_steps where session_id = $1', [sessionId])).length === 0, 'its steps dropped', 5_000);
      });
    }

    it('given up once taken over sessions.max_turn_attempts times: its message is answered with the reason, nothing runs again', async () => {
      // Restarted as by default: a minute before the turn counts as abandoned.
      const { userId, sessionId, writes } = await chatKilledAt('after a tool finished', { nextTurn: { message: 'thanks', answer: 'you are welcome' } });
      // A process took it over once already and died too, as its step says.
      await query(`insert into turn_steps (session_id, anchor, step, body) select session_id, anchor, 'takeover:1', '' from turn_steps where session_id = $1 and step = 'settings'`, [sessionId]);
      await fixture.killAndRestart({ ...quickly, SESSIONS_MAX_TURN_ATTEMPTS: '1' });
      const reason = 'assistant_error: Error: the service process answering this message stopped before it finished, and so did the 1 that took it over (sessions.max_turn_attempts)';
      const rows = await waitFor(async () => {
        const stored = (await transcriptOf(userId)).map((entry) => entry.row);
        return stored.includes(reason) ? stored : undefined;
      }, 'the turn given up', 20_000);
      expect(rows).to.deep.equal(['user: save it', reason]);
      expect(written('once').length - writes, 'the tool started').to.equal(1);
      await waitFor(async () => (await query('select 1 from turn_steps where session_id = $1', [sessionId])).length === 0, 'its steps dropped', 5_000);
      // The session goes on; the failure's text stays out of its context.
      expect(await chat(userId, sessionId, 'thanks')).to.deep.equal({ status: 200, content: 'you are welcome' });
      const asked = fixture.llm.requests.filter((request) => request.kind === 'chat').at(-1)!.body.messages!;
      expect(asked.map((message) => String(message.content)).join('\n')).to.not.include('stopped before it finished');
    });

    it('drops steps left behind by a turn that was answered (only their drop was lost), and runs nothing', async () => {
      const userId = `user-${randomUUID()}`;
      const sessionId = randomUUID();
      fixture.llm.script({ match: { hasToolResults: false }, reply: { content: 'nothing to do' } });
      expect(await chat(userId, sessionId, 'hello')).to.deep.equal({ status: 200, content: 'nothing to do' });
      const writes = written('once').length;
      await query(`insert into turn_steps (session_id, anchor, step, body) values ($1, 'an-answered-turn', 'settings', '{"params":{},"system":[]}'), ($1, 'an-answered-turn', 'round:0', '{}')`, [sessionId]);
      await fixture.killAndRestart(quickly);
      await waitFor(async () => (await query('select 1 from turn_steps where session_id = $1', [sessionId])).length === 0, 'the stale steps dropped', 20_000);
      expect((await transcriptOf(userId)).map((entry) => entry.row)).to.deep.equal(['user: hello', 'assistant: nothing to do']);
      expect(written('once').length).to.equal(writes);
    });

    it('killed before its tool round was stored: nothing to finish, its message stays unanswered and no step is left', async () => {
      const { userId, sessionId } = await chatKilledAt('before the LLM call', { env: quickly });
      // Two sweeps of the restarted service after the turn would count as abandoned.
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS + QUIET_MS + 2 * LEASE_MS));
      expect((await transcriptOf(userId)).map((entry) => entry.row)).to.deep.equal(['user: save it']);
      expect(await query('select 1 from turn_steps where session_id = $1', [sessionId])).to.deep.equal([]);
    });
  });

  /** Creates a response of `input` for `userId`, in the background or keyed, without waiting for its end. */
  async function respond(userId: string, body: Record<string, unknown>, key?: string, extraHeaders: Record<string, string> = {}): Promise<{ status: number; body: ResponseBody }> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json', 'X-User-ID': userId, ...extraHeaders };
    if (key) headers['Idempotency-Key'] = key;
    const response = await fetch(`http://127.0.0.1:${fixture.port}/v1/responses`, { method: 'POST', headers, body: JSON.stringify({ model: 'svc-agent', ...body }) });
    if (!body.stream || response.status !== 200) return { status: response.status, body: (await response.json()) as ResponseBody };
    // Streamed: the response as its last event carries it.
    const last = sseEvents(await response.text()).at(-1) as { response?: ResponseBody } | undefined;
    return { status: response.status, body: last?.response ?? { id: '', status: 'unfinished', output: [] } };
  }

  /** A response's stream read again from its start: each event's type, sequence number, delta and item. */
  async function eventsOf(userId: string, id: string): Promise<StreamedEvent[]> {
    const response = await fetch(`http://127.0.0.1:${fixture.port}/v1/responses/${id}?stream=true`, { headers: { 'X-User-ID': userId } });
    return sseEvents(await response.text()) as StreamedEvent[];
  }

  /** The checks of a response's stream read again: one response's events, in order, each call's item once, the text once. */
  function expectOneResponse(events: StreamedEvent[], outputText: string): void {
    const types = events.map((event) => event.type);
    expect(types.filter((type) => type === 'response.created'), 'created').to.have.length(1);
    expect(types.filter((type) => type === 'response.in_progress'), 'in progress').to.have.length(1);
    expect(types.at(-1)).to.equal('response.completed');
    const sequences = events.map((event) => event.sequence_number);
    expect(sequences, 'increasing sequence numbers').to.deep.equal([...new Set(sequences)].sort((a, b) => a - b));
    const calls = events.filter((event) => event.type === 'response.output_item.added' && event.item?.type === 'mcp_call');
    expect(calls, 'the call shown').to.have.length(1);
    expect(events.filter((event) => event.type === 'response.output_item.done' && event.item?.type === 'mcp_call'), 'the call done').to.have.length(1);
    expect(events.flatMap((event) => (event.type === 'response.output_text.delta' ? [event.delta] : [])).join(''), 'the text').to.equal(outputText);
  }

  describe('the Responses API in the background: taken over by the next start', () => {
    for (const point of points) {
      it(`killed ${point}: completed once, its stream that of one response, the tool started once`, async () => {
        const userId = `user-${randomUUID()}`;
        scriptTurn('once__slow-write', point);
        const writes = written('once').length;
        const created = await respond(userId, { input: 'save it', background: true });
        expect(created.status).to.equal(200);
        await killAt(point, 'once', writes);
        const completed = await waitFor(async () => {
          const { body } = await fetch(`http://127.0.0.1:${fixture.port}/v1/responses/${created.body.id}`, { headers: { 'X-User-ID': userId } }).then(async (response) => ({ body: (await response.json()) as ResponseBody }));
          expect(body.status).to.be.oneOf(['queued', 'in_progress', 'completed']);
          return body.status === 'completed' ? body : undefined;
        }, 'the response to complete', 30_000);
        expect(written('once').length - writes, 'the tool started').to.equal(1);
        const outputText = completed.output.flatMap((item) => (item.type === 'message' ? item.content!.map((part) => part.text) : [])).join('');
        expect(outputText).to.include('all done, saved');
        expect(completed.output.filter((item) => item.type === 'mcp_call'), 'the call in the output').to.have.length(1);
        expectOneResponse(await eventsOf(userId, created.body.id), outputText);
        const stored = await transcriptOf(userId);
        expect(new Set(stored.map((entry) => entry.session)).size, 'sessions (no branch)').to.equal(1);
        const rows = stored.map((entry) => entry.row);
        expect(rows.filter((row) => row === 'user: save it'), 'the message').to.have.length(1);
        expect(rows.filter((row) => row.startsWith('tool: ')), 'the tool result').to.have.length(1);
        expect(rows.filter((row) => row.startsWith('assistant: ')), 'the answer').to.have.length(1);
        if (point === 'after a tool started') expect(rows.find((row) => row.startsWith('tool: '))).to.include('is unknown');
      });
    }
  });

  describe('the Responses API, sent again without a key by the openai SDK', () => {
    for (const point of points) {
      it(`killed ${point}: answered once, the tool started once, no second session`, async () => {
        const userId = `user-${randomUUID()}`;
        scriptTurn('once__slow-write', point);
        const writes = written('once').length;
        const first = respond(userId, { input: 'save it', stream: true }).catch(() => undefined);
        await killAt(point, 'once', writes);
        await first;
        // The SDK's retry says it is one (X-Stainless-Retry-Count): the first turn its attempt began is continued.
        const retried = await respond(userId, { input: 'save it', stream: true }, undefined, { 'X-Stainless-Retry-Count': '1' });
        expect(retried.status).to.equal(200);
        expect(retried.body.status).to.equal('completed');
        expect(written('once').length - writes, 'the tool started').to.equal(1);
        const stored = await expectStoredOnce(userId, 'save it');
        if (point === 'after a tool started') expect(stored.find((entry) => entry.row.startsWith('tool: '))!.row).to.include('is unknown');
      });
    }
  });

  describe('the Responses API, a keyed request sent again', () => {
    for (const point of points) {
      it(`killed ${point}: answered once, the tool started once`, async () => {
        const userId = `user-${randomUUID()}`;
        const key = randomUUID();
        scriptTurn('once__slow-write', point);
        const writes = written('once').length;
        // Streamed, so the LLM's answer streams too (the retry sends the same body: its key's).
        const first = respond(userId, { input: 'save it', stream: true }, key).catch(() => undefined);
        await killAt(point, 'once', writes);
        await first;
        // Sent again with its key: it waits until the dead process's hold on the key lapsed, then continues the turn.
        const retried = await respond(userId, { input: 'save it', stream: true }, key);
        expect(retried.status).to.equal(200);
        expect(retried.body.status).to.equal('completed');
        expect(written('once').length - writes, 'the tool started').to.equal(1);
        const stored = await expectStoredOnce(userId, 'save it');
        if (point === 'after a tool started') expect(stored.find((entry) => entry.row.startsWith('tool: '))!.row).to.include('is unknown');
      });
    }
  });
});
