import { expect } from 'chai';
import { CallLog } from '../../runtime/observability/call-log.js';
import type { CallRecord, CallStore, NewCallRecord } from '../../runtime/ports.js';

function toolCall(sessionId: string, name: string): NewCallRecord {
  return {
    kind: 'tool',
    sessionId,
    userId: 'u',
    turnId: 'turn_1',
    state: 'use_tool',
    startedAt: new Date(0),
    durationMs: 1,
    outcome: 'ok',
    error: null,
    name,
    server: 's',
    tool: name,
    arguments: '{}',
    result: 'r',
    approvalRequestId: null,
  };
}

const names = (calls: CallRecord[]) => calls.map((call) => (call.kind === 'tool' ? call.name : call.model));

describe('CallLog', () => {
  it('keeps a session\'s most recent calls, oldest first, dropping the oldest past the per-session bound', async () => {
    const log = new CallLog({ perSession: 3, total: 100 });
    for (const name of ['a', 'b', 'c', 'd', 'e']) log.remember(toolCall('s1', name));
    expect(names(await log.page('s1', { limit: 10 }))).to.deep.equal(['c', 'd', 'e']);
    expect(log.size).to.equal(3);
  });

  it('drops the oldest call of any session past the total bound', async () => {
    const log = new CallLog({ perSession: 10, total: 3 });
    log.remember(toolCall('s1', 'a'));
    log.remember(toolCall('s2', 'b'));
    log.remember(toolCall('s1', 'c'));
    log.remember(toolCall('s2', 'd'));
    expect(names(await log.page('s1', { limit: 10 }))).to.deep.equal(['c']);
    expect(names(await log.page('s2', { limit: 10 }))).to.deep.equal(['b', 'd']);
    expect(log.size).to.equal(3);
  });

  it('stays within both bounds over many calls of a busy session beside a quiet one', async () => {
    const log = new CallLog({ perSession: 5, total: 8 });
    log.remember(toolCall('quiet', 'q'));
    for (let i = 0; i < 5_000; i += 1) log.remember(toolCall('busy', `b${i}`));
    expect(names(await log.page('busy', { limit: 10 }))).to.deep.equal(['b4995', 'b4996', 'b4997', 'b4998', 'b4999']);
    // The quiet session's call is the oldest, but the busy one's own bound kept the total low.
    expect(names(await log.page('quiet', { limit: 10 }))).to.deep.equal(['q']);
    expect(log.size).to.equal(6);
    for (let i = 0; i < 3; i += 1) log.remember(toolCall('third', `t${i}`));
    expect(names(await log.page('quiet', { limit: 10 }))).to.deep.equal([]);
    expect(log.size).to.equal(8);
  });

  it('pages by id after the last one listed, and forgets a session', async () => {
    const log = new CallLog({ perSession: 10, total: 10 });
    const [a, b] = ['a', 'b', 'c'].map((name) => log.remember(toolCall('s1', name)));
    expect(names(await log.page('s1', { afterId: a!.id, limit: 1 }))).to.deep.equal(['b']);
    expect(names(await log.page('s1', { afterId: b!.id, limit: 10 }))).to.deep.equal(['c']);
    await log.forget('s1');
    expect(await log.page('s1', { limit: 10 })).to.deep.equal([]);
    expect(log.size).to.equal(0);
  });

  it('writes to its store and reads pages from it when it has one', async () => {
    const appended: NewCallRecord[][] = [];
    const deleted: string[] = [];
    const store: CallStore = {
      append: async (records) => void appended.push(records),
      page: async () => [{ ...toolCall('s1', 'from-store'), id: 41 }],
      deleteSession: async (sessionId) => (deleted.push(sessionId), 1),
    };
    const log = new CallLog({ perSession: 10, total: 10 }, store);
    expect(log.stores).to.equal(true);
    log.remember(toolCall('s1', 'in-memory'));
    await log.persist([toolCall('s1', 'in-memory')]);
    expect(names(await log.page('s1', { limit: 10 }))).to.deep.equal(['from-store']);
    await log.forget('s1');
    expect(appended.map((batch) => batch.map((call) => call.kind === 'tool' && call.name))).to.deep.equal([['in-memory']]);
    expect(deleted).to.deep.equal(['s1']);
  });
});
