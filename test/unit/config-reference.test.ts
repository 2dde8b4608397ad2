import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { loadConfig } from '../../config/load-config.js';
import { configSchema } from '../../config/schema.js';
import { CONFIG_REFERENCE_FILE, ENV_ALIASES, renderConfigReference } from '../../scripts/config-reference.js';

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

  it('`--check` exits 0 on the committed file', async () => {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/config-reference.ts', '--check'], { cwd: REPO_ROOT, stdio: 'ignore' });
      child.on('error', reject);
      child.on('close', resolve);
    });
    expect(code).to.equal(0);
  });
});
