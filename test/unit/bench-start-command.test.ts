import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startNodeFlags } from '../../scripts/bench/start-command.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the Node flags the bench gives the service (npm start’s)', () => {
  let folder: string;
  beforeEach(() => (folder = mkdtempSync(join(tmpdir(), 'start-command-'))));
  afterEach(() => rmSync(folder, { recursive: true, force: true }));
  const withStart = (start: string | undefined) =>
    writeFileSync(join(folder, 'package.json'), JSON.stringify({ scripts: start === undefined ? {} : { start } }));

  it('are the words of the start script between node and the entry point', () => {
    withStart('node --max-semi-space-size=32 --stack-size=2000 scripts/svc-agent.mjs start');
    expect(startNodeFlags(folder)).to.deep.equal(['--max-semi-space-size=32', '--stack-size=2000']);
    withStart('node scripts/svc-agent.mjs start');
    expect(startNodeFlags(folder)).to.deep.equal([]);
  });

  it('refuse a start script that does not run the entry point with node, instead of benching something else', () => {
    for (const start of ['tsx scripts/svc-agent.mjs', 'node dist/scripts/cli.js start', undefined]) {
      withStart(start);
      expect(() => startNodeFlags(folder), String(start)).to.throw(/start script is not "node \[flags\] scripts\/svc-agent.mjs"/);
    }
  });

  it('read the repository’s own start script', () => {
    expect(startNodeFlags(REPO_ROOT)).to.include('--max-semi-space-size=32');
  });
});
