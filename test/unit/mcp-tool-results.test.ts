import { expect } from 'chai';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { mcpClientSdk, type McpClientSdk } from '../../runtime/tools/mcp-client-sdk.js';
import { describeCallFailure, formatToolContent, parseToolArguments } from '../../runtime/tools/mcp-tool-results.js';

const context = { server: 'srv', tool: 'do-it', timeoutMs: 500, cancelled: false };

describe('parseToolArguments', () => {
  it('returns an empty object when the arguments are empty', () => {
    expect(parseToolArguments('')).to.deep.equal({ ok: true, value: {} });
  });

  it('returns the object when the arguments are a JSON object', () => {
    expect(parseToolArguments('{"a":1}')).to.deep.equal({ ok: true, value: { a: 1 } });
  });

  it('says the JSON is invalid when it does not parse', () => {
    const parsed = parseToolArguments('{"a":');
    expect(parsed.ok).to.equal(false);
    expect(parsed.ok ? '' : parsed.message).to.contain('not valid JSON');
  });

  it('refuses arrays and scalars when they are given as arguments', () => {
    expect(parseToolArguments('[1]').ok).to.equal(false);
    expect(parseToolArguments('3').ok).to.equal(false);
    expect(parseToolArguments('null').ok).to.equal(false);
  });
});

describe('formatToolContent', () => {
  it('joins text parts and summarises the others when the result is mixed', () => {
    const result: CallToolResult = {
      content: [
        { type: 'text', text: 'first' },
        { type: 'image', data: 'AAAA', mimeType: 'image/png' },
        { type: 'audio', data: 'AAAA', mimeType: 'audio/wav' },
        { type: 'resource_link', uri: 'file:///a.txt', name: 'a.txt' },
        { type: 'resource', resource: { uri: 'file:///b.txt', text: 'inline text' } },
        { type: 'resource', resource: { uri: 'file:///c.bin', blob: 'AAAA', mimeType: 'application/octet-stream' } },
      ],
    };
    expect(formatToolContent(result)).to.equal(
      'first\n[image: image/png]\n[audio: audio/wav]\n[resource link: a.txt file:///a.txt]\ninline text\n[resource: file:///c.bin (application/octet-stream)]',
    );
  });

  it('falls back to the structured content when there is no content', () => {
    expect(formatToolContent({ content: [], structuredContent: { sum: 5 } })).to.equal('{"sum":5}');
  });

  it('says so when the result is empty', () => {
    expect(formatToolContent({ content: [] })).to.equal('(the tool returned no content)');
  });
});

describe('describeCallFailure', () => {
  // The errors a connection meets: made by the SDK the service loads.
  let McpError: McpClientSdk['McpError'];
  let ErrorCode: McpClientSdk['ErrorCode'];
  before(async () => {
    ({ McpError, ErrorCode } = await mcpClientSdk.load());
  });

  it('reports a cancellation without a restart when the call was cancelled', () => {
    const failure = describeCallFailure(new McpError(ErrorCode.RequestTimeout, 'aborted'), { ...context, cancelled: true });
    expect(failure).to.deep.equal({ message: 'the call to do-it was cancelled', restart: false });
  });

  it('reports the time-out and asks for a restart when the request timed out', () => {
    const failure = describeCallFailure(new McpError(ErrorCode.RequestTimeout, 'Request timed out'), context);
    expect(failure).to.deep.equal({ message: 'tool do-it on server srv did not answer within 500 ms', restart: true });
  });

  it('names the exit and asks for a restart when the connection closed', () => {
    const failure = describeCallFailure(new McpError(ErrorCode.ConnectionClosed, 'Connection closed'), { ...context, exitReason: 'its process exited with code 3' });
    expect(failure.message).to.equal('server srv closed the connection during the call to do-it: its process exited with code 3');
    expect(failure.restart).to.equal(true);
  });

  it('passes the error on without a restart when the server answered with a JSON-RPC error', () => {
    const failure = describeCallFailure(new McpError(ErrorCode.InvalidParams, 'Tool do-it not found'), context);
    expect(failure).to.deep.equal({ message: 'tool do-it on server srv failed: Tool do-it not found', restart: false });
  });

  it('names the schema problem and asks for a restart when the result is malformed', () => {
    const parsed = z.object({ content: z.array(z.string()) }).safeParse({ content: 'x' });
    const failure = describeCallFailure(parsed.error, context);
    expect(failure.message).to.match(/^server srv returned a malformed result for do-it \(content: /);
    expect(failure.restart).to.equal(true);
  });
});
