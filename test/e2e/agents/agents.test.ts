import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { sql } from 'kysely';
import { startTestService, type TestService } from '../../support/service-harness.js';
import type { AgentResource } from '../../../gateway/agents/agents-routes.js';

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const ADMIN = { Authorization: 'Bearer admin-key' };

type Agent = AgentResource;
type Deletion = { id: string; status: string; memory_exported: boolean; export_location: string | null; deleted_at: string };

describe('/v1/agents', () => {
  let harness: TestService;
  let exportDir: string;

  before(async () => {
    exportDir = join(mkdtempSync(join(tmpdir(), 'agents-export-')), 'nested');
    harness = await startTestService({ env: { API_KEYS: 'admin-key,alice-key:alice', AGENTS_EXPORT_DIR: exportDir } });
  });
  after(async () => {
    await harness?.close();
    rmSync(join(exportDir, '..'), { recursive: true, force: true });
  });

  /** One chat turn; returns the session id. */
  async function say(user: string, content: string, sessionId?: string, headers: Record<string, string> = ADMIN): Promise<{ status: number; sessionId: string }> {
    const response = await fetch(`${harness.baseURL}/chat/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-User-ID': user, ...(sessionId ? { 'X-Session-ID': sessionId } : {}), ...headers },
      body: JSON.stringify({ messages: [{ role: 'user', content }] }),
    });
    await response.arrayBuffer();
    return { status: response.status, sessionId: response.headers.get('x-session-id') ?? '' };
  }

  async function conversation(user: string, turns: string[]): Promise<string> {
    const { sessionId } = await say(user, turns[0]!);
    for (const turn of turns.slice(1)) expect((await say(user, turn, sessionId)).status).to.equal(200);
    return sessionId;
  }

  function call(method: string, path: string, body?: unknown, headers: Record<string, string> = ADMIN): Promise<Response> {
    return fetch(`${harness.baseURL}/agents${path}`, {
      method,
      headers: { 'Content-Type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  }

  async function rows(sessionId: string): Promise<number> {
    const result = await sql<{ count: number }>`select count(*)::int as count from conversations where session_id = ${sessionId}`.execute(harness.service.database.db);
    return Number(result.rows[0]!.count);
  }

  describe('GET /v1/agents/{agent_id}', () => {
    it('describes a live agent after a conversation', async () => {
      const sessionId = await conversation('ann', ['first question', 'second question']);
      const response = await call('GET', `/${sessionId}`);
      expect(response.status).to.equal(200);
      const agent = (await response.json()) as Agent;
      expect(agent).to.include({ id: sessionId, name: `agent-${sessionId.slice(0, 8)}`, status: 'active', user_id: 'ann' });
      expect(agent.model).to.deep.equal({ provider: 'openai-compatible', name: harness.config.llm.model });
      expect(agent.memory).to.deep.equal({ total_entries: 4, working_memory: 4, long_term_memory: 0 });
      expect(await rows(sessionId)).to.equal(4);
      expect(agent.state.current).to.be.a('string').that.is.not.empty;
      expect(agent.state.transitions).to.be.a('number').greaterThan(0);
      expect(agent.tools).to.be.an('array');
      expect(agent.created_at).to.match(ISO_UTC);
      expect(agent.last_active).to.match(ISO_UTC);
      expect(Date.parse(agent.last_active)).to.be.at.least(Date.parse(agent.created_at));
    });

    it('answers 404 in the OpenAI shape to an unknown id', async () => {
      const response = await call('GET', '/no-such-agent');
      expect(response.status).to.equal(404);
      expect(((await response.json()) as { error: { type: string } }).error.type).to.equal('not_found_error');
    });

    it('shows a user-bound key only its own agents', async () => {
      const bobs = await conversation('bob', ['hello from bob']);
      const alices = (await say('alice', 'hello from alice', undefined, { Authorization: 'Bearer alice-key' })).sessionId;
      expect((await call('GET', `/${bobs}`, undefined, { Authorization: 'Bearer alice-key' })).status).to.equal(404);
      expect((await call('GET', `/${alices}`, undefined, { Authorization: 'Bearer alice-key' })).status).to.equal(200);
      const list = (await (await call('GET', '', undefined, { Authorization: 'Bearer alice-key' })).json()) as { data: Agent[] };
      expect(list.data.map((agent) => agent.user_id)).to.deep.equal(['alice']);
    });
  });

  describe('GET /v1/agents', () => {
    it('lists a user\'s agents in pages', async () => {
      const created = [];
      for (const topic of ['one', 'two', 'three']) created.push(await conversation('lister', [topic]));
      const first = (await (await call('GET', '?user_id=lister&limit=2')).json()) as { object: string; data: Agent[]; has_more: boolean; next_cursor: string };
      expect(first.object).to.equal('list');
      expect(first.data.map((agent) => agent.id)).to.deep.equal([created[2], created[1]]);
      expect(first.has_more).to.equal(true);
      const second = (await (await call('GET', `?user_id=lister&limit=2&after=${first.next_cursor}`)).json()) as typeof first;
      expect(second.data.map((agent) => agent.id)).to.deep.equal([created[0]]);
      expect(second.has_more).to.equal(false);
      expect(second.next_cursor).to.equal(null);
    });

    it('answers 400 to a bad limit or cursor', async () => {
      const cursor = (text: string) => Buffer.from(text, 'utf8').toString('base64url');
      const badCursors = [cursor('1700000000000'), cursor('-5:session'), cursor('99999999999999999999:session'), cursor(':session')];
      for (const query of ['?limit=0', '?limit=101', '?limit=abc', '?after=%2F%2F', ...badCursors.map((value) => `?after=${value}`)]) {
        const response = await call('GET', query);
        expect(response.status, query).to.equal(400);
        expect(((await response.json()) as { error: { type: string } }).error.type).to.equal('invalid_request_error');
      }
    });
  });

  describe('DELETE /v1/agents/{agent_id}', () => {
    it('deletes the agent and its memory; the session cannot be continued', async () => {
      const sessionId = await conversation('dana', ['remember this', 'and this']);
      const response = await call('DELETE', `/${sessionId}`);
      expect(response.status).to.equal(200);
      const deletion = (await response.json()) as Deletion;
      expect(deletion).to.include({ id: sessionId, status: 'deleted', memory_exported: false, export_location: null });
      expect(deletion.deleted_at).to.match(ISO_UTC);
      expect(await rows(sessionId)).to.equal(0);
      expect((await call('GET', `/${sessionId}`)).status).to.equal(404);
      expect((await say('dana', 'are you there?', sessionId)).status).to.equal(410);
      expect(await rows(sessionId)).to.equal(0);
    });

    it('keeps the transcript with preserve_memory', async () => {
      const sessionId = await conversation('erin', ['keep me']);
      const deletion = (await (await call('DELETE', `/${sessionId}`, { preserve_memory: true })).json()) as Deletion;
      expect(deletion.status).to.equal('deleted');
      expect(await rows(sessionId)).to.equal(2);
      expect((await say('erin', 'again', sessionId)).status).to.equal(410);
    });

    it('writes a complete export with export_data', async () => {
      const sessionId = await conversation('fay', ['export this line', 'and this one']);
      const deletion = (await (await call('DELETE', `/${sessionId}`, { export_data: true })).json()) as Deletion;
      expect(deletion.memory_exported).to.equal(true);
      expect(deletion.export_location).to.be.a('string');
      expect(deletion.export_location!.startsWith(exportDir)).to.equal(true);
      const exported = JSON.parse(readFileSync(deletion.export_location!, 'utf8')) as {
        agent: { id: string; user_id: string; state: { current: string; transitions: number }; snapshot: unknown };
        transcript: Array<{ role: string; content: string }>;
        long_term_memories: unknown[];
      };
      expect(exported.agent).to.include({ id: sessionId, user_id: 'fay' });
      expect(exported.agent.state.transitions).to.be.greaterThan(0);
      expect(exported.agent.snapshot).to.be.an('object');
      expect(exported.transcript.map((turn) => turn.role)).to.deep.equal(['user', 'assistant', 'user', 'assistant']);
      expect(exported.transcript[0]!.content).to.equal('export this line');
      expect(exported.transcript[3]!.content).to.equal('Echo: and this one');
      expect(exported.long_term_memories).to.deep.equal([]);
      expect(await rows(sessionId)).to.equal(0);
    });

    it('answers a second DELETE harmlessly with the first deletion time', async () => {
      const sessionId = await conversation('gus', ['twice']);
      const first = (await (await call('DELETE', `/${sessionId}`, { export_data: true })).json()) as Deletion;
      const again = await call('DELETE', `/${sessionId}`, { export_data: true });
      expect(again.status).to.equal(200);
      expect(await again.json()).to.deep.include({ id: sessionId, status: 'deleted', memory_exported: false, export_location: null, deleted_at: first.deleted_at });
    });

    it('answers 400 to bad options and 404 to unknown or foreign agents', async () => {
      const sessionId = await conversation('hal', ['stay']);
      for (const body of [{ preserve_memory: 'yes' }, { export_data: 1 }, [true]]) {
        const response = await call('DELETE', `/${sessionId}`, body);
        expect(response.status, JSON.stringify(body)).to.equal(400);
      }
      expect((await call('DELETE', `/${sessionId}`, undefined, { Authorization: 'Bearer alice-key' })).status).to.equal(404);
      expect((await call('DELETE', '/no-such-agent')).status).to.equal(404);
      expect((await call('GET', `/${sessionId}`)).status).to.equal(200);
    });
  });
});
