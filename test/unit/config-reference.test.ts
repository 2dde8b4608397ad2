import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { BUDGET_ENV } from '../../config/budget-schema.js';
import { loadConfig } from '../../config/load-config.js';
import { configSchema } from '../../config/schema.js';
import { CONFIG_REFERENCE_FILE, ENV_ALIASES, ENV_EXAMPLE_FILE, renderConfigReference, renderEnvExample } from '../../scripts/config-reference.js';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

type Leaf = { env?: string; default?: unknown; sensitive?: boolean };

/** Every setting of the convict schema by dotted key (an object with a `default` is a setting). */
function schemaSettings(node: object, path: string[] = []): Array<{ key: string } & Leaf> {
  return Object.entries(node).flatMap(([name, child]: [string, unknown]) => {
    const key = [...path, name];
    if (child !== null && typeof child === 'object' && !('default' in child)) return schemaSettings(child, key);
    return [{ key: key.join('.'), ...(child as Leaf) }];
  });
}

function rowOf(markdown: string, key: string): string | undefined {
  return markdown.split('\n').find((line) => line.startsWith(`| \`${key}\` |`));
}

describe('config reference (docs/configuration.md)', () => {
  const committed = readFileSync(CONFIG_REFERENCE_FILE, 'utf8');

  it('is what the generator makes from the schema (run `npm run docs:config` when this fails)', () => {
    expect(committed).to.equal(renderConfigReference());
  });

  it('lists every schema key on a row with its environment variable', () => {
    const settings = schemaSettings(configSchema);
    expect(settings.length).to.be.greaterThan(50);
    for (const { key, env } of settings) {
      const row = rowOf(committed, key);
      expect(row, `a row for ${key}`).to.be.a('string');
      if (env) expect(row, `${key}'s row`).to.include(`\`${env}\``);
    }
  });

  it('never shows the default of a sensitive setting', () => {
    const sensitive = schemaSettings(configSchema).filter((setting) => setting.sensitive && setting.default !== '');
    expect(sensitive.map(({ key }) => key)).to.include('llm.api_key');
    for (const { key, default: value } of sensitive) {
      expect(rowOf(committed, key)).to.include('| set (sensitive) |').and.not.include(String(value));
    }
  });

  it('documents only environment aliases the loader honours', () => {
    for (const [variable, alias] of Object.entries(ENV_ALIASES)) {
      const setting = schemaSettings(configSchema).find(({ env }) => env === variable);
      expect(setting, `a setting read from ${variable}`).to.not.equal(undefined);
      const value = setting!.key.split('.').reduce<unknown>((node, name) => (node as Record<string, unknown>)[name], loadConfig({ [alias]: '2345' }));
      expect(value, `${alias} read as ${variable}`).to.equal(2345);
    }
  });

  it('`--check` exits 0 on the committed files', async () => {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/config-reference.ts', '--check'], { cwd: REPO_ROOT, stdio: 'ignore' });
      child.on('error', reject);
      child.on('close', resolve);
    });
    expect(code).to.equal(0);
  });
});

/** The commented-out `# NAME=value` lines of an environment file, as a shell would read them once uncommented. */
function exampleVariables(text: string): Map<string, string> {
  const variables = new Map<string, string>();
  for (const line of text.split('\n')) {
    const match = /^# ([A-Z][A-Z0-9_]*)=(.*)$/.exec(line);
    if (!match) continue;
    const [, name, raw] = match as unknown as [string, string, string];
    const value = raw.startsWith("'") ? raw.slice(1, -1) : raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
    variables.set(name, value);
  }
  return variables;
}

describe('environment example (.env.example)', () => {
  const committed = readFileSync(ENV_EXAMPLE_FILE, 'utf8');

  it('is what the generator makes from the schema (run `npm run docs:config` when this fails)', () => {
    expect(committed).to.equal(renderEnvExample());
  });

  it('sets nothing as it stands: every line is blank or a comment', () => {
    const lines = committed.split('\n').filter((line) => line.trim() !== '');
    expect(lines.filter((line) => !line.startsWith('#'))).to.deep.equal([]);
  });

  it('lists every environment variable of the schema once, and CONFIG_FILE', () => {
    const names = [...committed.matchAll(/^# ([A-Z][A-Z0-9_]*)=/gm)].map((match) => match[1]);
    // `budgets` is one setting whose default budgets have a variable each.
    const expected = [...schemaSettings(configSchema).flatMap(({ env }) => (env ? [env] : [])), ...Object.values(BUDGET_ENV)];
    expect(names).to.have.members(['CONFIG_FILE', ...expected]);
    expect(names).to.have.lengthOf(expected.length + 1);
  });

  it('names each environment alias beside the variable it stands in for', () => {
    for (const [variable, alias] of Object.entries(ENV_ALIASES)) {
      expect(committed).to.include(`# ${alias} is read as ${variable} when ${variable} is not set.\n# ${variable}=`);
    }
  });

  it('leaves every sensitive setting empty', () => {
    const variables = exampleVariables(committed);
    const sensitive = schemaSettings(configSchema).filter((setting) => setting.sensitive);
    expect(sensitive.map(({ env }) => env)).to.include('LLM_API_KEY');
    for (const { env } of sensitive) expect(variables.get(env!), env).to.equal('');
  });

  it('gives the defaults when its values are the environment (sensitive ones left unset)', () => {
    const sensitive = new Set(schemaSettings(configSchema).flatMap(({ env, sensitive }) => (sensitive && env ? [env] : [])));
    const environment = Object.fromEntries([...exampleVariables(committed)].filter(([name]) => !sensitive.has(name)));
    expect(Object.keys(environment)).to.include.members(['SYSTEM_PROMPT', 'TOOLS_APPROVAL_WORDS', 'OAUTH_SCOPES']);
    expect(loadConfig(environment)).to.deep.equal(loadConfig({}));
  });
});
