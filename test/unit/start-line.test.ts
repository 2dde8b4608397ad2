import { expect } from 'chai';
import { startLine, toolServersLine } from '../../gateway/server/start-line.js';

describe('startLine', () => {
  const facts = { workers: 1, localMode: true, llmBaseUrl: 'http://localhost:30000/v1', database: 'pglite' };

  it('names a wildcard bind as such, with the address this machine reaches it at', () => {
    expect(startLine({ ...facts, bound: { address: '0.0.0.0', port: 1111 } })).to.equal(
      'svc-agent listening on 0.0.0.0:1111 (every IPv4 interface of this machine), OpenAI base URL http://127.0.0.1:1111/v1, LLM server http://localhost:30000/v1, database pglite; local mode (no API_KEYS): /inspect and /metrics answer clients on this machine only',
    );
    expect(startLine({ ...facts, bound: { address: '::', port: 1111 } })).to.include('listening on [::]:1111 (every interface of this machine), OpenAI base URL http://[::1]:1111/v1');
  });

  it('shows the bound address itself, the workers, and that keys are required outside local mode', () => {
    const line = startLine({ ...facts, workers: 4, localMode: false, database: 'pg', bound: { address: '10.1.2.3', port: 8080 } });
    expect(line).to.equal('4 workers listening on port 8080, bound to 10.1.2.3:8080, OpenAI base URL http://10.1.2.3:8080/v1, LLM server http://localhost:30000/v1, database pg; API keys required');
  });

  it('names each tool server with its status and the tools it offers, as /health counts them', () => {
    const line = toolServersLine({
      everything: { status: 'connected', transport: 'stdio', tools: 12, attempts: 1 },
      github: { status: 'per_user', transport: 'http', tools: 1, attempts: 1, users: 0 },
      files: { status: 'failed', transport: 'stdio', tools: 0, attempts: 1, error: 'spawn ENOENT' },
    });
    expect(line).to.equal('tool servers: everything connected, 12 tools; github per_user, 1 tool; files failed, 0 tools');
  });
});
