import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import type { LogPage, TranscriptEntry, TransitionEntry } from '../../../gateway/agents/agents-routes.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ALICE = { Authorization: 'Bearer alice-key' };
const BOB = { Authorization: 'Bearer bob-key' };

type ErrorBody = { error: { type: string; param: string | null } };

describe('agent transitions and transcript', () => {
  let harness: TestService;
  let exportDir: string;

  before(async () => {
    exportDir = mkdtempSync(join(tmpdir(), 'agent-history-'));
    harness = await startTestService({ env: { API_KEYS: 'admin-key,alice-key:alice,bob-key:bob', AGENTS_EXPORT_DIR: exportDir } });
  });
  after(async () => {
    await harness?.close();
    rmSync(exportDir, { recursive: true, force: true });
  });

  /** A conversation of alice through the official client, one user message per request; returns its session id. */
  async function converse(turns: string[]): Promise<string> {
    const sessionId = randomUUID();
    const client = new OpenAI({ baseURL: harness.baseURL, apiKey: 'alice-key', maxRetries: 0, defaultHeaders: { 'X-Session-ID': sessionId } });
    for (const content of turns) {
      const { response } = await client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content }] }).withResponse();
      expect(response.headers.get('x-session-id')).to.equal(sessionId);
    }
    return sessionId;
  }

  function get(path: string, headers: Record<string, string> = ALICE): Promise<Response> {
    return fetch(`${harness.baseURL}/agents${path}`, { headers });
  }

  async function page<T>(path: string, headers: Record<string, string> = ALICE): Promise<LogPage<T>> {
    const response = await get(path, headers);
    expect(response.status, path).to.equal(200);
    return (await response.json()) as LogPage<T>;
  }

  /** Every entry of a log, following next_after page by page. */
  async function readAll<T>(path: string, limit: number): Promise<{ pages: Array<LogPage<T>>; entries: T[] }> {
    const pages: Array<LogPage<T>> = [];
    for (let after: number | null = null; ; ) {
      const current: LogPage<T> = await page<T>(`${path}?limit=${limit}${after === null ? '' : `&after=${after}`}`);
      pages.push(current);
      if (!current.has_more) break;
      after = current.next_after;
    }
    return { pages, entries: pages.flatMap((each) => each.data) };
  }

  it('lists the transitions of the graph from the first turn on, oldest first', async () => {
    const sessionId = await converse(['one', 'two', 'three']);
    const { object, data, has_more, next_after } = await page<TransitionEntry>(`/${sessionId}/transitions`);

    expect({ object, has_more, next_after }).to.deep.equal({ object: 'list', has_more: false, next_after: null });
    // The default graph starts in agent_reply; every later turn goes from ask_user to agent_reply and back.
    expect(data.map(({ from, to }) => `${from}>${to}`)).to.deep.equal([
      'agent_reply>ask_user',
      'ask_user>agent_reply',
      'agent_reply>ask_user',
      'ask_user>agent_reply',
      'agent_reply>ask_user',
    ]);
    for (const transition of data) expect(transition.at).to.match(ISO_UTC);
    expect(data.map((transition) => Date.parse(transition.at))).to.deep.equal(data.map((transition) => Date.parse(transition.at)).sort((a, b) => a - b));
    expect(data.find((transition) => transition.to === 'agent_reply')?.reason).to.equal('user_message');
  });

  it('pages the transitions by id, each exactly once and in order', async () => {
    const sessionId = await converse(['a', 'b', 'c', 'd']);
    const whole = (await page<TransitionEntry>(`/${sessionId}/transitions`)).data;
    const { pages, entries } = await readAll<TransitionEntry>(`/${sessionId}/transitions`, 2);

    expect(whole).to.have.length(7);
    expect(pages.map((each) => each.data.length)).to.deep.equal([2, 2, 2, 1]);
    expect(entries).to.deep.equal(whole);
    expect(pages.slice(0, -1).map((each) => each.next_after)).to.deep.equal(pages.slice(0, -1).map((each) => each.data.at(-1)!.id));
  });

  it('gives the transcript with the turns in order, in pages', async () => {
    const sessionId = await converse(['first', 'second', 'third']);
    const { pages, entries } = await readAll<TranscriptEntry>(`/${sessionId}/messages`, 4);

    expect(pages.map((each) => each.data.length)).to.deep.equal([4, 2]);
    expect(entries.map(({ role, content }) => ({ role, content }))).to.deep.equal([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'Echo: first' },
      { role: 'user', content: 'second' },
      { role: 'assistant', content: 'Echo: second' },
      { role: 'user', content: 'third' },
      { role: 'assistant', content: 'Echo: third' },
    ]);
    for (const entry of entries) expect(entry.created_at).to.match(ISO_UTC);
  });

  it('hides an agent from a key bound to another user, as GET does', async () => {
    const sessionId = await converse(['private']);
    for (const log of ['transitions', 'messages']) {
      const response = await get(`/${sessionId}/${log}`, BOB);
      expect(response.status, log).to.equal((await get(`/${sessionId}`, BOB)).status);
      expect(response.status, log).to.equal(404);
      expect(((await response.json()) as ErrorBody).error.type).to.equal('not_found_error');
      expect((await get(`/${sessionId}/${log}`, { Authorization: 'Bearer admin-key' })).status, log).to.equal(200);
    }
  });

  it('answers 404 for an unknown agent', async () => {
    for (const log of ['transitions', 'messages']) expect((await get(`/no-such-agent/${log}`)).status, log).to.equal(404);
  });

  it('answers 400 naming the parameter for a bad limit or after', async () => {
    const sessionId = await converse(['limits']);
    const cases: Array<[string, string]> = [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=two', 'limit'],
      ['limit=1&limit=2', 'limit'],
      ['after=-1', 'after'],
      ['after=1.5', 'after'],
      ['after=abc', 'after'],
    ];
    for (const log of ['transitions', 'messages']) {
      for (const [query, param] of cases) {
        const response = await get(`/${sessionId}/${log}?${query}`);
        expect(response.status, `${log}?${query}`).to.equal(400);
        expect(((await response.json()) as ErrorBody).error, `${log}?${query}`).to.include({ type: 'invalid_request_error', param });
      }
    }
  });

  it('answers an empty last page when after is past every id', async () => {
    const sessionId = await converse(['far ahead']);
    for (const log of ['transitions', 'messages']) {
      // Past the range of the conversation table's integer ids too.
      const past = await page<unknown>(`/${sessionId}/${log}?after=99999999999`);
      expect(past, log).to.deep.equal({ object: 'list', data: [], has_more: false, next_after: null });
    }
  });

  it('exports the transitions and deletes them with the agent', async () => {
    const sessionId = await converse(['keep a record']);
    const listed = (await page<TransitionEntry>(`/${sessionId}/transitions`)).data;
    const deletion = await fetch(`${harness.baseURL}/agents/${sessionId}`, {
      method: 'DELETE',
      headers: { ...ALICE, 'Content-Type': 'application/json' },
      body: JSON.stringify({ export_data: true }),
    });
    const { export_location } = (await deletion.json()) as { export_location: string };

    expect((JSON.parse(readFileSync(export_location, 'utf8')) as { transitions: TransitionEntry[] }).transitions).to.deep.equal(listed);
    expect(await storedTransitions(sessionId)).to.equal(0);
    expect((await get(`/${sessionId}/transitions`)).status).to.equal(404);
  });

  it('keeps the transitions of a deleted agent with preserve_memory', async () => {
    const sessionId = await converse(['keep me']);
    const deletion = await fetch(`${harness.baseURL}/agents/${sessionId}`, {
      method: 'DELETE',
      headers: { ...ALICE, 'Content-Type': 'application/json' },
      body: JSON.stringify({ preserve_memory: true }),
    });
    expect(deletion.status).to.equal(200);
    expect(await storedTransitions(sessionId)).to.equal(1);
  });

  async function storedTransitions(sessionId: string): Promise<number> {
    const rows = await harness.service.database.db.selectFrom('session_transitions').select('id').where('session_id', '=', sessionId).execute();
    return rows.length;
  }
});
