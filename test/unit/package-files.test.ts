import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { PACKAGE_ROOT, packageFile, resolveConfiguredFile } from '../../config/package-files.js';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');

describe('the package\'s own files (config/package-files.ts)', function () {
  let elsewhere: string;
  beforeEach(() => {
    elsewhere = mkdtempSync(join(tmpdir(), 'svc-cwd-'));
  });
  afterEach(() => rmSync(elsewhere, { recursive: true, force: true }));

  it('finds the package folder from the sources', function () {
    expect(PACKAGE_ROOT).to.equal(REPO_ROOT);
    expect(packageFile('config/default.yaml')).to.equal(join(REPO_ROOT, 'config', 'default.yaml'));
  });

  it('resolves the bundled default graph from a working directory that has no such file', function () {
    expect(resolveConfiguredFile('config/default-graph.yaml', elsewhere)).to.equal(join(REPO_ROOT, 'config', 'default-graph.yaml'));
  });

  it('prefers a file of that name in the working directory', function () {
    mkdirSync(join(elsewhere, 'config'));
    writeFileSync(join(elsewhere, 'config', 'default-graph.yaml'), 'initial: mine\n');
    expect(resolveConfiguredFile('config/default-graph.yaml', elsewhere)).to.equal(join(elsewhere, 'config', 'default-graph.yaml'));
  });

  it('names the working directory\'s path for a file found nowhere, and keeps absolute paths', function () {
    expect(resolveConfiguredFile('graphs/missing.yaml', elsewhere)).to.equal(join(elsewhere, 'graphs', 'missing.yaml'));
    expect(resolveConfiguredFile('/etc/svc/graph.yaml', elsewhere)).to.equal('/etc/svc/graph.yaml');
  });
});
