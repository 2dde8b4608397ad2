import { expect } from 'chai';
import type winston from 'winston';
import { logLineFormat, type LogFormat } from '../../gateway/server/logger.js';
import { closeRequestContext, noteRequestIds, openRequestContext, releaseSession } from '../../gateway/http/request-context.js';

/** Where winston keeps the finished line (triple-beam's MESSAGE). */
const MESSAGE = Symbol.for('message');

/** The line `format` makes of one entry. */
function lineOf(format: LogFormat, entry: Record<string, unknown>, label?: string): string {
  const info = logLineFormat(format, label).transform({ level: 'info', message: '', ...entry }) as winston.Logform.TransformableInfo;
  return info[MESSAGE] as string;
}

function jsonOf(entry: Record<string, unknown>, label?: string): Record<string, unknown> {
  const line = lineOf('json', entry, label);
  expect(line).not.to.include('\n');
  return JSON.parse(line) as Record<string, unknown>;
}

describe('log lines (gateway/logger)', () => {
  it('writes a json entry as one object: time, level, message, process, details, stack', () => {
    const stack = 'Error: boom\n    at somewhere (file.ts:1:1)';
    const entry = jsonOf({ level: 'error', message: 'request failed: boom', path: '/v1/models', stack }, 'worker 2');
    expect(Object.keys(entry)).to.deep.equal(['timestamp', 'level', 'message', 'process', 'path', 'stack']);
    expect(entry).to.include({ level: 'error', message: 'request failed: boom', process: 'worker 2', path: '/v1/models', stack });
    expect(Number.isNaN(Date.parse(entry.timestamp as string))).to.equal(false);
  });

  it('writes an error logged as the message with its stack when the format is json', () => {
    const entry = jsonOf({ level: 'error', message: new Error('broken pipe') });
    expect(entry.message).to.equal('broken pipe');
    expect(entry.stack).to.match(/^Error: broken pipe\n/);
  });

  it('writes a json line even when a detail cannot be serialised', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const entry = jsonOf({ message: 'odd', cyclic, big: 1n });
    expect(entry).to.include({ message: 'odd' });
    expect(entry.logError).to.be.a('string');
  });

  it('keeps the text line as before: time, level, label, message, then the details as JSON', () => {
    const line = lineOf('text', { message: 'GET /health 200 1ms', status: 200 }, 'worker 2');
    expect(line).to.match(/^\S+Z info \[worker 2\] GET \/health 200 1ms \{"status":200\}$/);
    expect(lineOf('text', { message: 'plain' })).to.match(/^\S+Z info plain$/);
  });

  it('adds the ids of the request a session\'s turn runs for to a line about the session, until the turn ends', () => {
    const context = openRequestContext('req-1');
    noteRequestIds('req-1', { userId: 'ada' });
    expect(jsonOf({ message: 'before the session is known', sessionId: 'session-1' })).not.to.have.property('requestId');
    noteRequestIds('req-1', { sessionId: 'session-1' });
    const during = jsonOf({ message: 'session ask_user -> agent_reply', sessionId: 'session-1', durationMs: 3 });
    expect(Object.keys(during)).to.deep.equal(['timestamp', 'level', 'message', 'requestId', 'sessionId', 'userId', 'durationMs']);
    expect(during).to.include({ requestId: 'req-1', sessionId: 'session-1', userId: 'ada' });
    // The request ends first (a background response's turn goes on): its session's lines still name it.
    closeRequestContext(context);
    expect(jsonOf({ message: 'later', sessionId: 'session-1' })).to.include({ requestId: 'req-1' });
    releaseSession('session-1', 'req-1');
    expect(jsonOf({ message: 'after the turn', sessionId: 'session-1' })).not.to.have.property('requestId');
  });

  it('puts the ids first among the details of a text line', () => {
    const context = openRequestContext('req-2');
    noteRequestIds('req-2', { sessionId: 's', userId: 'u' });
    const line = lineOf('text', { message: 'tool a/b ok', sessionId: 's', durationMs: 4 });
    expect(line).to.match(/ tool a\/b ok \{"requestId":"req-2","sessionId":"s","userId":"u","durationMs":4\}$/);
    releaseSession('s', 'req-2');
    closeRequestContext(context);
  });

  it('puts the client\'s X-Request-ID beside the service\'s request id on a line about the session', () => {
    const context = openRequestContext('req_4', 'client-trace-4');
    noteRequestIds('req_4', { sessionId: 'session-4', userId: 'ada' });
    const line = jsonOf({ message: 'tool a/b ok', sessionId: 'session-4', durationMs: 4 });
    expect(Object.keys(line)).to.deep.equal(['timestamp', 'level', 'message', 'requestId', 'clientRequestId', 'sessionId', 'userId', 'durationMs']);
    expect(line).to.include({ requestId: 'req_4', clientRequestId: 'client-trace-4' });
    releaseSession('session-4', 'req_4');
    closeRequestContext(context);
  });

  it('keeps the ids a line names itself: another request or user than the turn\'s, and lines about no session get none', () => {
    const context = openRequestContext('req-3');
    noteRequestIds('req-3', { sessionId: 'mine', userId: 'ada' });
    expect(jsonOf({ message: 'evicted', sessionId: 'mine', userId: 'bob' })).not.to.have.property('requestId');
    expect(jsonOf({ message: 'request failed', sessionId: 'mine', requestId: 'req-elsewhere' })).to.include({ requestId: 'req-elsewhere' }).and.not.to.have.property('userId');
    expect(jsonOf({ message: 'OAuth account connected', userId: 'bob' })).not.to.have.any.keys('sessionId', 'requestId');
    releaseSession('mine', 'req-3');
    closeRequestContext(context);
  });

  it('adds no ids to a line written outside any request', () => {
    expect(jsonOf({ message: 'svc-agent listening' })).not.to.have.any.keys('requestId', 'sessionId', 'userId');
  });
});
