import { expect } from 'chai';
import type { McpTool } from '../../runtime/tools/mcp-connection.js';
import { buildCatalogue, describeTools, exposedToolName, isAllowed, toolDefinition } from '../../runtime/tools/mcp-tool-catalogue.js';

const OPENAI_FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

function tool(name: string, extra: Partial<McpTool> = {}): McpTool {
  return { name, inputSchema: { type: 'object', properties: {} }, ...extra };
}

describe('exposedToolName', () => {
  it('joins server and tool with a double underscore when both are valid names', () => {
    expect(exposedToolName('everything', 'get-sum')).to.equal('everything__get-sum');
  });

  it('replaces characters outside the OpenAI pattern when the tool name has them', () => {
    expect(exposedToolName('files', 'read.file/v2 beta')).to.equal('files__read_file_v2_beta');
  });

  it('shortens to 64 characters with a distinguishing hash when the name is too long', () => {
    const first = exposedToolName('server', 'x'.repeat(80));
    const second = exposedToolName('server', `${'x'.repeat(79)}y`);
    expect(first).to.match(OPENAI_FUNCTION_NAME).and.have.length(64);
    expect(second).to.match(OPENAI_FUNCTION_NAME).and.have.length(64);
    expect(first).to.not.equal(second);
  });
});

describe('buildCatalogue', () => {
  it('gives tools unique names when two sanitise to the same name', () => {
    const catalogue = buildCatalogue([{ server: 'files', tools: [tool('read.file'), tool('read_file')] }]);
    const names = [...catalogue.keys()];
    expect(names).to.have.length(2);
    expect(names[0]).to.equal('files__read_file');
    expect(names[1]).to.match(OPENAI_FUNCTION_NAME).and.not.equal('files__read_file');
    expect(catalogue.get(names[1] ?? '')?.tool.name).to.equal('read_file');
  });

  it('leaves out tools that only run as tasks when listing', () => {
    const catalogue = buildCatalogue([{ server: 's', tools: [tool('plain'), tool('task-only', { execution: { taskSupport: 'required' } })] }]);
    expect([...catalogue.keys()]).to.deep.equal(['s__plain']);
  });
});

describe('isAllowed', () => {
  const entry = { name: 'files__read_file', server: 'files', tool: tool('read.file') };

  it('allows every tool when the state has no list', () => {
    expect(isAllowed(entry, undefined)).to.equal(true);
  });

  it('matches the exposed name, the server, <server>__* and the original name when listed', () => {
    for (const pattern of ['files__read_file', 'files', 'files__*', 'files__read.file', '*']) {
      expect(isAllowed(entry, [pattern]), pattern).to.equal(true);
    }
  });

  it('refuses the tool when the list names other tools or is empty', () => {
    expect(isAllowed(entry, ['other__*', 'files__write_file'])).to.equal(false);
    expect(isAllowed(entry, [])).to.equal(false);
  });
});

describe('toolDefinition', () => {
  it('uses the input schema without $schema as the parameters when converting', () => {
    const definition = toolDefinition({
      name: 's__t',
      server: 's',
      tool: tool('t', { description: 'Does t', inputSchema: { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { q: { type: 'string' } } } }),
    });
    expect(definition).to.deep.equal({
      type: 'function',
      function: { name: 's__t', description: 'Does t', parameters: { type: 'object', properties: { q: { type: 'string' } } } },
    });
  });
});

describe('describeTools', () => {
  it('returns nothing when there are no tools', () => {
    expect(describeTools([])).to.equal('');
  });

  it('lists name, description and input schema when there are tools', () => {
    const text = describeTools([{ name: 's__t', server: 's', tool: tool('t', { description: 'Does t' }) }]);
    expect(text).to.contain('## Tools');
    expect(text).to.contain('### s__t\nDoes t\nInput schema: {"type":"object","properties":{}}');
  });
});
