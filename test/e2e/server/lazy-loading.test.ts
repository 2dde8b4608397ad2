import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { runToExit } from '../../support/run-to-exit.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The packages a service loads only when it uses them: what starting it with nothing optional configured must not load. */
const LAZY_PACKAGES = ['@modelcontextprotocol/sdk', '@a2a-js/sdk', '@statelyai/inspect', 'openai'];

describe('start-up loads what a request needs', function () {
  this.timeout(60_000);

  it('loads no MCP, A2A, XState inspector or embeddings package until they are used, and loads MCP and A2A when they are', async () => {
    // A process of its own (test/support/lazy-loading-run.ts), since this one has loaded every package.
    const run = await runToExit(process.execPath, ['--import', 'tsx', 'test/support/lazy-loading-run.ts'], { cwd: REPO_ROOT, env: process.env });
    expect(run.code, run.stderr).to.equal(0);
    const report = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as { answered: boolean; unused: string[]; used: string[]; tools: string[]; cardName: unknown };
    expect(report.answered).to.equal(true);
    // The recorder sees the packages the service loads from the start.
    expect(report.unused).to.include.members(['express', 'kysely', 'undici']);
    expect(report.unused.filter((name) => LAZY_PACKAGES.includes(name))).to.deep.equal([]);
    // Once /mcp and the A2A card are asked for, their SDKs are loaded, and they answer.
    expect(report.used).to.include.members(['@modelcontextprotocol/sdk', '@a2a-js/sdk']);
    expect(report.tools).to.deep.equal(['svc-agent']);
    expect(report.cardName).to.equal('svc-agent');
  });
});
