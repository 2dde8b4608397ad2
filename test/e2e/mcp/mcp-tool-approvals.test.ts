import { expect } from 'chai';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { ElicitRequest, ElicitResult } from '@modelcontextprotocol/sdk/types.js';
import { connectMcp, toolText } from '../../support/mcp-client.js';
import { useEverythingService } from '../../support/everything-service.js';

const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';
const SUM_QUESTION = 'May I run the tool get-sum of the server everything with the arguments {"a":2,"b":3}? Reply yes to run it, or no.';
const DENIED = 'Error: the user did not approve this call of get-sum (server everything), so it did not run.';

describe('tool approvals over MCP (require_approval: [get-sum])', function () {
  this.timeout(30_000);
  const service = useEverythingService({ serverOptions: '    require_approval: [get-sum]\n' });
  const clients: Client[] = [];
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()));
  });

  /** A client that answers elicitations with `answer` (and records what it was asked), or one that declares none. */
  async function connect(answer?: (request: ElicitRequest) => ElicitResult): Promise<{ client: Client; asked: ElicitRequest[] }> {
    const asked: ElicitRequest[] = [];
    const elicit = answer
      ? (request: ElicitRequest) => {
          asked.push(request);
          return answer(request);
        }
      : undefined;
    const { client } = await connectMcp(service.harness.service.url, elicit ? { elicit } : {});
    clients.push(client);
    return { client, asked };
  }

  it('asks through elicitation and runs the call when the user approves', async () => {
    const { client, asked } = await connect(() => ({ action: 'accept', content: { approve: true } }));
    const result = await client.callTool({ name: 'svc-agent', arguments: { message: SUM_REQUEST } });
    expect(asked).to.have.length(1);
    expect(asked[0]!.params.message).to.equal('The agent wants to run the tool get-sum of the server everything with the arguments {"a":2,"b":3}. May it?');
    expect(asked[0]!.params).to.deep.include({ mode: 'form' });
    expect((asked[0]!.params as { requestedSchema: { required: string[] } }).requestedSchema.required).to.deep.equal(['approve']);
    expect(result.isError).to.not.equal(true);
    expect(toolText(result)).to.match(/^Tool result: .*\b5\b/);
    expect(service.toolCalls.map(({ tool, outcome }) => ({ tool, outcome }))).to.deep.equal([{ tool: 'get-sum', outcome: 'ok' }]);
  });

  it('tells the agent the call was refused when the user declines the form, and the call never runs', async () => {
    const { client, asked } = await connect(() => ({ action: 'decline' }));
    const result = await client.callTool({ name: 'svc-agent', arguments: { message: SUM_REQUEST } });
    expect(asked).to.have.length(1);
    expect(toolText(result)).to.equal(`Tool result: ${DENIED} Their reason: The user declined the approval form.`);
    expect(service.toolCalls).to.deep.equal([]);
  });

  it('refuses the call when the user answers the form with approve: false', async () => {
    const { client } = await connect(() => ({ action: 'accept', content: { approve: false } }));
    const result = await client.callTool({ name: 'svc-agent', arguments: { message: SUM_REQUEST } });
    expect(toolText(result)).to.equal(`Tool result: ${DENIED}`);
    expect(service.toolCalls).to.deep.equal([]);
  });

  it('returns the question when the user cancels the form, and the next call answers it', async () => {
    const { client } = await connect(() => ({ action: 'cancel' }));
    const asked = await client.callTool({ name: 'svc-agent', arguments: { message: SUM_REQUEST } });
    expect(toolText(asked)).to.equal(SUM_QUESTION);
    const answered = await client.callTool({ name: 'svc-agent', arguments: { message: 'yes' } });
    expect(toolText(answered)).to.match(/^Tool result: .*\b5\b/);
    expect(service.toolCalls.map(({ tool }) => tool)).to.deep.equal(['get-sum']);
  });

  it('returns the question as the result when the client has no elicitation, and runs the call when the next call says yes', async () => {
    const { client } = await connect();
    const asked = await client.callTool({ name: 'svc-agent', arguments: { message: SUM_REQUEST } });
    expect(asked.isError).to.not.equal(true);
    expect(toolText(asked)).to.equal(SUM_QUESTION);
    expect(service.toolCalls).to.deep.equal([]);
    const answered = await client.callTool({ name: 'svc-agent', arguments: { message: 'yes' } });
    expect(toolText(answered)).to.match(/^Tool result: .*\b5\b/);
    expect(service.toolCalls.map(({ tool, outcome }) => ({ tool, outcome }))).to.deep.equal([{ tool: 'get-sum', outcome: 'ok' }]);
  });
});
