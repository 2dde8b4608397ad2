import { mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ensureBuilt } from '../../scripts/build.mjs';

describe('ensureBuilt (scripts/build.mjs)', function () {
  let root: string;
  let compiles: number;
  const compile = (at: string) => {
    compiles += 1;
    mkdirSync(join(at, 'dist', 'gateway'), { recursive: true });
    writeFileSync(join(at, 'dist', 'gateway', 'main.js'), `// build ${compiles}\n`);
  };

  beforeEach(function () {
    root = mkdtempSync(join(tmpdir(), 'svc-build-'));
    compiles = 0;
    writeFileSync(join(root, 'tsconfig.json'), '{}');
    writeFileSync(join(root, 'tsconfig.build.json'), '{}');
    mkdirSync(join(root, 'gateway', 'nested'), { recursive: true });
    writeFileSync(join(root, 'gateway', 'main.ts'), 'export const a = 1;\n');
    writeFileSync(join(root, 'gateway', 'nested', 'part.ts'), 'export const b = 2;\n');
  });
  afterEach(function () {
    rmSync(root, { recursive: true, force: true });
  });

  it('compiles when dist/ is missing, and not again while the sources stay the same', function () {
    expect(ensureBuilt(root, compile)).to.equal(true);
    expect(ensureBuilt(root, compile)).to.equal(false);
    expect(compiles).to.equal(1);
  });

  it('compiles again when a source file changes, even deep in a folder', function () {
    ensureBuilt(root, compile);
    writeFileSync(join(root, 'gateway', 'nested', 'part.ts'), 'export const b = 3;\n');
    expect(ensureBuilt(root, compile)).to.equal(true);
    expect(compiles).to.equal(2);
  });

  it('compiles again when a source file is added or the build settings change', function () {
    ensureBuilt(root, compile);
    writeFileSync(join(root, 'gateway', 'added.ts'), 'export const c = 4;\n');
    expect(ensureBuilt(root, compile)).to.equal(true);
    writeFileSync(join(root, 'tsconfig.build.json'), '{"compilerOptions":{}}');
    expect(ensureBuilt(root, compile)).to.equal(true);
    expect(compiles).to.equal(3);
  });

  it('builds from scratch, so a deleted source leaves no compiled file behind', function () {
    ensureBuilt(root, compile);
    writeFileSync(join(root, 'dist', 'gateway', 'deleted.js'), '// from a source since deleted\n');
    rmSync(join(root, 'gateway', 'nested', 'part.ts'));
    ensureBuilt(root, compile);
    expect(existsSync(join(root, 'dist', 'gateway', 'deleted.js'))).to.equal(false);
  });

  it('compiles again after a build that failed', function () {
    expect(() => ensureBuilt(root, () => { throw new Error('tsc failed'); })).to.throw('tsc failed');
    expect(ensureBuilt(root, compile)).to.equal(true);
  });

  it('leaves an installed package (dist/ shipped, no sources) as it is', function () {
    rmSync(join(root, 'tsconfig.build.json'));
    expect(ensureBuilt(root, compile)).to.equal(false);
    expect(compiles).to.equal(0);
  });
});
