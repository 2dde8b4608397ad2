import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import ts from 'typescript';

/**
 * The rules docs/architecture.md gives for what each folder may import, checked against every
 * import of the sources (static, re-exports and `import()`).
 */
const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SOURCE_FOLDERS = ['machines', 'runtime', 'gateway', 'storage', 'config', 'scripts'];

/** One import of a source file: what it names, and whether it brings in types only. */
type SourceImport = { from: string; target: string; typeOnly: boolean };

/** What a file imports: another source file (repository-relative, `.ts`), or a package by name. */
function importsOf(file: string): SourceImport[] {
  const text = readFileSync(join(REPO_ROOT, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const found: SourceImport[] = [];
  const add = (specifier: string, typeOnly: boolean) => found.push({ from: file, target: targetOf(file, specifier), typeOnly });
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, isTypeOnlyImport(node));
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      add(node.moduleSpecifier.text, node.isTypeOnly || (node.exportClause !== undefined && ts.isNamedExports(node.exportClause) && node.exportClause.elements.every((element) => element.isTypeOnly)));
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      add(node.arguments[0].text, false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function isTypeOnlyImport(node: ts.ImportDeclaration): boolean {
  const clause = node.importClause;
  if (!clause) return false; // a side-effect import
  if (clause.isTypeOnly) return true;
  if (clause.name) return false;
  const bindings = clause.namedBindings;
  return bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((element) => element.isTypeOnly);
}

function targetOf(file: string, specifier: string): string {
  if (!specifier.startsWith('.')) return specifier;
  return normalize(join(dirname(file), specifier)).replace(/\.js$/, '.ts');
}

function sourceFiles(folder: string): string[] {
  return readdirSync(join(REPO_ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => relative(REPO_ROOT, join(entry.parentPath, entry.name)));
}

const FILES = SOURCE_FOLDERS.flatMap(sourceFiles);
const IMPORTS = FILES.flatMap(importsOf);
const topFolder = (path: string) => path.split('/')[0] ?? '';
const isSource = (target: string) => target.endsWith('.ts') || target.endsWith('.mjs');

/** The imports from files under `from` of files under `to`, as `from -> to` lines. */
function importsBetween(from: string, to: string, which: (item: SourceImport) => boolean = () => true): string[] {
  return IMPORTS.filter((item) => item.from.startsWith(`${from}/`) && item.target.startsWith(`${to}/`) && which(item)).map((item) => `${item.from} -> ${item.target}`);
}

/** A module whose own imports are types only: using its values brings in no behaviour of its folder. */
function isLeaf(file: string): boolean {
  return IMPORTS.filter((item) => item.from === file && isSource(item.target)).every((item) => item.typeOnly);
}

describe('what each folder may import (docs/architecture.md)', () => {
  it('reads the sources it checks', () => {
    // A rule over no files would pass whatever the code did.
    for (const folder of SOURCE_FOLDERS) expect(FILES.filter((file) => topFolder(file) === folder), folder).not.to.be.empty;
    expect(IMPORTS.filter((item) => item.typeOnly)).not.to.be.empty;
    expect(IMPORTS.filter((item) => item.target.startsWith('runtime/') && item.from.startsWith('gateway/'))).not.to.be.empty;
  });

  it('runtime/ never imports the gateway, storage or scripts: it reaches storage through runtime/ports.ts', () => {
    expect([...importsBetween('runtime', 'gateway'), ...importsBetween('runtime', 'storage'), ...importsBetween('runtime', 'scripts')]).to.deep.equal([]);
  });

  it('storage/ takes from runtime/ only types and modules that bring no behaviour (the ports, service errors, JSON text)', () => {
    const behaviour = importsBetween('storage', 'runtime', (item) => !item.typeOnly && !isLeaf(item.target));
    expect(behaviour).to.deep.equal([]);
    expect([...importsBetween('storage', 'gateway'), ...importsBetween('storage', 'machines'), ...importsBetween('storage', 'config'), ...importsBetween('storage', 'scripts')]).to.deep.equal([]);
  });

  it('machines/ are pure: no value from outside machines/, and nothing of the gateway, storage, config or scripts', () => {
    const values = IMPORTS.filter((item) => item.from.startsWith('machines/') && isSource(item.target) && !item.target.startsWith('machines/') && !item.typeOnly);
    expect(values.map((item) => `${item.from} -> ${item.target}`)).to.deep.equal([]);
    expect(['gateway', 'storage', 'config', 'scripts'].flatMap((folder) => importsBetween('machines', folder))).to.deep.equal([]);
  });

  it('config/ never imports the gateway, storage or scripts, and from runtime/ only modules that bring no behaviour', () => {
    expect(['gateway', 'storage', 'scripts'].flatMap((folder) => importsBetween('config', folder))).to.deep.equal([]);
    expect(importsBetween('config', 'runtime', (item) => !item.typeOnly && !isLeaf(item.target))).to.deep.equal([]);
  });

  it('only gateway/server/ wires storage in: the routes reach the stores through the runtime', () => {
    expect(importsBetween('gateway', 'storage').filter((line) => !line.startsWith('gateway/server/'))).to.deep.equal([]);
    expect(importsBetween('gateway', 'scripts')).to.deep.equal([]);
  });

  it('HTTP is the gateway’s: no other folder of the service imports express', () => {
    const http = IMPORTS.filter((item) => (item.target === 'express' || item.target === 'better-sse') && !['gateway', 'scripts'].includes(topFolder(item.from)));
    expect(http.map((item) => item.from)).to.deep.equal([]);
  });

  it('every gateway file lives in the folder of its resource, its plumbing (http/) or the process (server/)', () => {
    expect(FILES.filter((file) => file.startsWith('gateway/') && file.split('/').length === 2)).to.deep.equal([]);
  });

  it('has no import circles, type imports included', () => {
    expect(importCircles()).to.deep.equal([]);
  });
});

/** The import circles among the source files: each strongly connected group of more than one file (Tarjan). */
function importCircles(): string[][] {
  const edges = new Map<string, string[]>();
  for (const item of IMPORTS) {
    if (!isSource(item.target)) continue;
    edges.set(item.from, [...(edges.get(item.from) ?? []), item.target]);
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  let next = 0;
  const connect = (file: string) => {
    index.set(file, next);
    low.set(file, next);
    next += 1;
    stack.push(file);
    onStack.add(file);
    for (const target of edges.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1) circles.push(group.sort());
  };
  for (const file of FILES) if (!index.has(file)) connect(file);
  return circles;
}
