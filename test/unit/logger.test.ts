import { expect } from 'chai';
import type winston from 'winston';
import { logLineFormat, type LogFormat } from '../../gateway/logger.js';
import { noteRequestIds, runInRequestContext } from '../../gateway/request-context.js';

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

  it('adds the request id to a line written while the request is served, and its session and user once noted', () => {
    const [before, after] = runInRequestContext({ requestId: 'req-1' }, () => {
      const first = jsonOf({ message: 'early' });
      noteRequestIds({ userId: 'ada' });
      noteRequestIds({ sessionId: 'session-1' });
      return [first, jsonOf({ message: 'later', durationMs: 3 })];
    });
    expect(before).to.include({ requestId: 'req-1' });
    expect(before).not.to.have.any.keys('sessionId', 'userId');
    expect(Object.keys(after)).to.deep.equal(['timestamp', 'level', 'message', 'requestId', 'sessionId', 'userId', 'durationMs']);
    expect(after).to.include({ requestId: 'req-1', sessionId: 'session-1', userId: 'ada' });
  });

  it('puts the ids first among the details of a text line', () => {
    const line = runInRequestContext({ requestId: 'req-2', sessionId: 's', userId: 'u' }, () => lineOf('text', { message: 'tool a/b ok', durationMs: 4 }));
    expect(line).to.match(/ tool a\/b ok \{"requestId":"req-2","sessionId":"s","userId":"u","durationMs":4\}$/);
  });

  it('keeps the ids a line names itself when it is about another session or user than the request', () => {
    runInRequestContext({ requestId: 'req-3', sessionId: 'mine', userId: 'ada' }, () => {
      expect(jsonOf({ message: 'evicted', sessionId: 'other', userId: 'bob' })).to.include({ requestId: 'req-3', sessionId: 'other', userId: 'bob' });
      expect(jsonOf({ message: 'OAuth account connected', userId: 'bob' })).not.to.have.property('sessionId');
      expect(jsonOf({ message: 'request failed', requestId: 'req-elsewhere' })).not.to.have.any.keys('sessionId', 'userId');
    });
  });

  it('adds no ids to a line written outside any request', () => {
    expect(jsonOf({ message: 'svc-agent listening' })).not.to.have.any.keys('requestId', 'sessionId', 'userId');
  });
});
