import { expect } from 'chai';
import { agentSessionOf, elicitsForms, mcpSessionFacts, newMcpSessionId } from '../../../gateway/mcp/mcp-session-ids.js';

describe('MCP session ids', () => {
  it('mints ids that say whether the client answers elicitations, and reads them back', () => {
    const plain = newMcpSessionId({ elicits: false });
    const eliciting = newMcpSessionId({ elicits: true });
    expect(plain).to.match(/^[0-9a-f]{32}$/);
    expect(eliciting).to.match(/^[0-9a-f]{32}-e$/);
    expect(mcpSessionFacts(plain)).to.deep.equal({ elicits: false });
    expect(mcpSessionFacts(eliciting)).to.deep.equal({ elicits: true });
    expect(newMcpSessionId({ elicits: false })).to.not.equal(plain);
  });

  it('reads no facts from an id this service did not mint', () => {
    for (const id of ['', 'abc', `${'0'.repeat(32)}-x`, 'A'.repeat(32), `${'0'.repeat(31)}`, `${'0'.repeat(32)}-e-e`]) {
      expect(mcpSessionFacts(id), id).to.equal(undefined);
    }
  });

  it('derives the same agent session for the same user and MCP session, another for another user', () => {
    const id = newMcpSessionId({ elicits: false });
    expect(agentSessionOf(id, 'ada')).to.equal(agentSessionOf(id, 'ada'));
    expect(agentSessionOf(id, 'ada')).to.match(/^mcp-[0-9a-f]{32}$/);
    expect(agentSessionOf(id, 'bob')).to.not.equal(agentSessionOf(id, 'ada'));
    expect(agentSessionOf(newMcpSessionId({ elicits: false }), 'ada')).to.not.equal(agentSessionOf(id, 'ada'));
  });

  it('finds form elicitation in the capabilities that declare it, in both spellings', () => {
    expect(elicitsForms({ elicitation: {} })).to.equal(true);
    expect(elicitsForms({ elicitation: { form: {} } })).to.equal(true);
    expect(elicitsForms({ elicitation: { form: {}, url: {} } })).to.equal(true);
    expect(elicitsForms({ elicitation: { url: {} } })).to.equal(false);
    expect(elicitsForms({ sampling: {} })).to.equal(false);
    expect(elicitsForms(undefined)).to.equal(false);
    expect(elicitsForms({ elicitation: true })).to.equal(false);
  });
});
