import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import OpenAI from 'openai';
import { freePort } from '../../../scripts/bench/child-process.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { killToExit, runToExit } from '../../support/run-to-exit.js';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Resolves with the first group of the first output line matching `pattern`; rejects if the process exits first. */
function waitForLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  const seen: string[] = [];
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`exited with ${code} before printing ${pattern}:\n${seen.join('\n')}`));
    child.once('exit', onExit);
    for (const stream of [child.stdout!, child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => {
        seen.push(line);
        const match = pattern.exec(line);
        if (!match) return;
        child.off('exit', onExit);
        resolve(match[1] ?? line);
      });
    }
  });
}

/** Every file under `dir` but its node_modules, relative to it. */
function packageFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .filter((path) => !path.startsWith('node_modules/'));
}

describe('svc-agent installed as a command (npm pack, npm install -g)', function () {
  this.timeout(60_000);
  let folder: string;
  /** `<prefix>/bin/svc-agent`, as the global install links it. */
  let command: string;
  let installed: string;
  /** A working directory outside the repository. */
  let work: string;
  /** Only what a shell gives: nothing of the test's own settings reaches the command. */
  let env: NodeJS.ProcessEnv;
  let llm: FakeLlm;
  let service: ChildProcess | undefined;

  const svcAgent = (args: string[], extra: NodeJS.ProcessEnv = {}) => runToExit(command, args, { cwd: work, env: { ...env, ...extra } });

  before(async function () {
    // npm pack runs `prepare` (tsc, when the sources changed); the install fetches the dependencies (from npm's cache when it has them).
    this.timeout(300_000);
    folder = mkdtempSync(join(tmpdir(), 'svc-installed-'));
    const packed = await runToExit('npm', ['pack', '--pack-destination', folder], { cwd: REPO_ROOT, env: process.env });
    expect(packed.code, packed.stderr).to.equal(0);
    const [tarball] = readdirSync(folder).filter((name) => /^svc-agent-.*\.tgz$/.test(name));
    expect(tarball, packed.stdout).to.be.a('string');
    const prefix = join(folder, 'prefix');
    const install = await runToExit('npm', ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', join(folder, tarball!)], { cwd: folder, env: process.env });
    expect(install.code, install.stderr).to.equal(0);
    command = join(prefix, 'bin', 'svc-agent');
    installed = join(prefix, 'lib', 'node_modules', 'svc-agent');
    work = join(folder, 'work');
    mkdirSync(work);
    env = { PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR };
    llm = await startFakeLlm();
  });
  after(async () => {
    if (service) await killToExit(service);
    await llm?.close();
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  it('prints the version of its package.json with --version', async () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    const shown = await svcAgent(['--version']);
    expect(shown.code).to.equal(0);
    expect(shown.stdout).to.equal(`${version}\n`);
  });

  it('lists its subcommands with --help', async () => {
    const help = await svcAgent(['--help']);
    expect(help.code).to.equal(0);
    for (const usage of ['svc-agent [start]', 'svc-agent graph validate [FILE]', 'svc-agent db migrate', 'svc-agent memory reembed', 'svc-agent --version']) {
      expect(help.stdout).to.include(usage);
    }
  });

  it("prints one subcommand's usage with COMMAND --help", async () => {
    const help = await svcAgent(['db', 'migrate', '--help']);
    expect(help.code).to.equal(0);
    expect(help.stdout).to.match(/^usage: svc-agent db migrate\n/);
  });

  it('prints the usage on stderr and exits 2 when the command is unknown', async () => {
    const unknown = await svcAgent(['db', 'drop']);
    expect(unknown.code).to.equal(2);
    expect(unknown.stdout).to.equal('');
    expect(unknown.stderr).to.match(/^svc-agent: unknown command 'db drop'\nusage: svc-agent \[start\]/);
  });

  it('checks the bundled default graph when the working directory has none', async () => {
    expect(existsSync(join(work, 'config'))).to.equal(false);
    const checked = await svcAgent(['graph', 'validate']);
    expect(checked.code, checked.stderr).to.equal(0);
    expect(checked.stdout).to.match(/^config\/default-graph\.yaml: valid state graph\n/);
  });

  it('lists the problems of a bad graph on stderr and exits 1', async () => {
    writeFileSync(join(work, 'bad-graph.yaml'), 'initial: nowhere\nstates:\n  ask_user: { description: waits, type: robot, transition: { next: [ask_user] } }\n');
    const checked = await svcAgent(['graph', 'validate', 'bad-graph.yaml']);
    expect(checked.code).to.equal(1);
    expect(checked.stdout).to.equal('');
    expect(checked.stderr).to.match(/^bad-graph\.yaml: 2 problems in the state graph\n/);
    expect(checked.stderr).to.include('unknown value "robot"');
  });

  it('migrates a fresh data folder, and applies nothing the second time', async () => {
    const dataDir = join(work, 'migrated');
    const first = await svcAgent(['db', 'migrate'], { DATA_DIR: dataDir });
    expect(first.code, first.stderr).to.equal(0);
    expect(first.stdout).to.include(`Migrated the embedded PGlite database in ${dataDir}, long-term memory off.`);
    expect(first.stdout).to.match(/\nApplied: core\/0001_conversations_and_sessions, /);
    const second = await svcAgent(['db', 'migrate'], { DATA_DIR: dataDir });
    expect(second.code, second.stderr).to.equal(0);
    expect(second.stdout).to.include('Already up to date: nothing applied.');
  });

  it('re-embeds the long-term memories of a migrated data folder', async () => {
    const memory = { DATA_DIR: join(work, 'memories'), MEMORY_USE_LONG_TERM: 'true', MEMORY_EMBEDDINGS: 'local' };
    const migrated = await svcAgent(['db', 'migrate'], memory);
    expect(migrated.code, migrated.stderr).to.equal(0);
    expect(migrated.stdout).to.include('long-term memory on');
    const reembedded = await svcAgent(['memory', 'reembed'], memory);
    expect(reembedded.code, reembedded.stderr).to.equal(0);
    expect(reembedded.stdout).to.include('with the local embedder');
    expect(reembedded.stdout).to.include('Re-embedded 0 memories; the service now starts with this embedder.');
  });

  it('serves the openai client when started, and exits 0 on SIGTERM', async () => {
    const port = await freePort();
    service = spawn(command, [], {
      cwd: work,
      env: { ...env, DATA_DIR: join(work, 'served'), APP_HOST: '127.0.0.1', APP_PORT: String(port), LLM_BASE_URL: llm.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(service, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const baseURL = await waitForLine(service, /OpenAI base URL (\S+\/v1)/);
    expect(baseURL).to.equal(`http://127.0.0.1:${port}/v1`);
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).to.equal(200);

    const client = new OpenAI({ baseURL, apiKey: 'placeholder', maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'installed?' }] });
    expect(completion.choices[0]!.message.content).to.equal('Echo: installed?');

    service.kill('SIGTERM');
    expect(await exited).to.deep.equal([0, null]);
  });

  it('exits 78 with one line naming the key when a setting is bad', async () => {
    const bad = await svcAgent([], { APP_PORT: 'eleven', DATA_DIR: join(work, 'never') });
    expect(bad.code).to.equal(78);
    expect(bad.stdout).to.equal('');
    expect(bad.stderr.trimEnd().split('\n')).to.have.length(1);
    expect(bad.stderr).to.match(/^Configuration error: app\.port: /);
  });

  it('holds the compiled JavaScript and bundled files, without the tests, the TypeScript sources or the development dependencies', () => {
    const files = packageFiles(installed);
    for (const needed of ['dist/scripts/cli.js', 'dist/gateway/server/main.js', 'dist/gateway/server/main.js.map', 'scripts/svc-agent.mjs', 'config/default.yaml', 'config/default-graph.yaml', 'gateway/inspect/page/index.html', 'docs/configuration.md']) {
      expect(files).to.include(needed);
    }
    expect(files.filter((path) => path.endsWith('.ts'))).to.deep.equal([]);
    expect(files.filter((path) => path.startsWith('test/') || path.startsWith('dist/test/'))).to.deep.equal([]);
    for (const development of ['typescript', 'tsx', 'mocha', 'chai']) expect(existsSync(join(installed, 'node_modules', development)), development).to.equal(false);
  });
});
