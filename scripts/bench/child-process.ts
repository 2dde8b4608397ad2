import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { addCleanup } from './cleanup.js';
import { groupPids } from './cpu-usage.js';

/** How a child process tells it is ready: a line on stdout/stderr (its first group is the URL), or a URL answering 200 (polled every `everyMs`, default 100). */
export type Readiness = { line: RegExp } | { probe: string; everyMs?: number };

/** What to run: a TypeScript entry point under `node --import tsx`, or a JavaScript one (`.js`, `.mjs`) under plain `node`. */
export type ChildSpec = {
  name: string;
  script: string;
  args?: string[];
  /** Node flags placed before the script, e.g. `--cpu-prof`. */
  nodeArgs?: string[];
  env?: NodeJS.ProcessEnv;
  cwd: string;
  ready: Readiness;
  readyTimeoutMs?: number;
};

/** A running child process under test, leader of its own process group. */
export type RunningChild = {
  name: string;
  /** The URL from its ready line, or the probed URL's origin. */
  url: string;
  process: ChildProcess;
  /** Output lines seen (the last ones are kept in `tail`). */
  lines: () => number;
  tail: () => string[];
  /** SIGTERM to the whole group, SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<void>;
};

const TAIL_LINES = 40;

// Children run in their own process groups and would outlive the bench: whatever is left at exit is killed.
const live = new Map<ChildProcess, string>();
process.on('exit', () => {
  for (const child of live.keys()) killGroup(child, 'SIGKILL');
});

/** The pids of the bench (`bench`) and of its running children with what they forked, by name, for CPU accounting. */
export function benchProcesses(): Record<string, number[]> {
  const pids: Record<string, number[]> = { bench: [process.pid] };
  for (const [child, name] of live) pids[name] = groupPids(child.pid!);
  return pids;
}

/** Spawns a child in its own process group and resolves once it is ready; it is stopped by `runCleanups` too. */
export async function startChild(spec: ChildSpec): Promise<RunningChild> {
  const child = spawn(process.execPath, nodeArguments(spec), {
    cwd: spec.cwd,
    env: spec.env ?? process.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tail: string[] = [];
  let lineCount = 0;
  const lineListeners = new Set<(line: string) => void>();
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream! }).on('line', (line) => {
      lineCount += 1;
      tail.push(line);
      if (tail.length > TAIL_LINES) tail.shift();
      for (const listener of lineListeners) listener(line);
    });
  }
  live.set(child, spec.name);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => live.delete(child));
  let stopping: Promise<void> | undefined;
  const stop = (graceMs = 15_000): Promise<void> =>
    (stopping ??= (async () => {
      unregister();
      if (child.exitCode !== null || child.signalCode !== null) return;
      killGroup(child, 'SIGTERM');
      const timedOut = await Promise.race([exited.then(() => false), sleep(graceMs).then(() => true)]);
      if (timedOut) {
        killGroup(child, 'SIGKILL');
        await exited;
      }
    })());
  const unregister = addCleanup(() => stop(5_000));
  try {
    const url = await waitReady(spec, child, lineListeners);
    return { name: spec.name, url, process: child, lines: () => lineCount, tail: () => [...tail], stop };
  } catch (error) {
    await stop(2_000);
    throw new Error(`${spec.name}: ${error instanceof Error ? error.message : String(error)}\n${tail.join('\n')}`);
  }
}

/** A TypeScript script run to its end: its stderr is passed through, its last stdout line is its JSON result. */
export type ScriptSpec = Omit<ChildSpec, 'ready' | 'readyTimeoutMs'>;

/** Runs a script in its own process group (killed by `runCleanups` if the bench stops first) and parses its result. */
export async function runScript<T>(spec: ScriptSpec): Promise<T> {
  const child = spawn(process.execPath, nodeArguments(spec), {
    cwd: spec.cwd,
    env: spec.env ?? process.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  live.set(child, spec.name);
  const unregister = addCleanup(async () => killGroup(child, 'SIGKILL'));
  let last = '';
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line.trim() !== '') last = line;
  });
  try {
    const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
    if (code !== 0) throw new Error(`${spec.name} exited with code ${code}, signal ${signal}`);
    return JSON.parse(last) as T;
  } finally {
    unregister();
    live.delete(child);
  }
}

/** The node command line of `spec`: TypeScript through the tsx loader, JavaScript as it is. */
function nodeArguments(spec: ScriptSpec): string[] {
  const loader = /\.m?js$/.test(spec.script) ? [] : ['--import', 'tsx'];
  return [...(spec.nodeArgs ?? []), ...loader, spec.script, ...(spec.args ?? [])];
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {
    // The group is gone already.
  }
}

async function waitReady(spec: ChildSpec, child: ChildProcess, lineListeners: Set<(line: string) => void>): Promise<string> {
  const timeoutMs = spec.readyTimeoutMs ?? 60_000;
  const controller = new AbortController();
  const failure = new Promise<never>((_, reject) => {
    const onExit = (code: number | null, signal: string | null) => reject(new Error(`exited before it was ready (code ${code}, signal ${signal})`));
    const onError = (error: Error) => reject(error);
    child.once('exit', onExit);
    child.once('error', onError);
    const timer = setTimeout(() => reject(new Error(`not ready within ${timeoutMs} ms`)), timeoutMs);
    controller.signal.addEventListener('abort', () => {
      child.off('exit', onExit);
      child.off('error', onError);
      clearTimeout(timer);
    });
  });
  const ready = 'line' in spec.ready ? waitForLine(spec.ready.line, lineListeners) : probe(spec.ready.probe, spec.ready.everyMs ?? 100, controller.signal);
  try {
    return await Promise.race([ready, failure]);
  } finally {
    controller.abort();
  }
}

function waitForLine(pattern: RegExp, lineListeners: Set<(line: string) => void>): Promise<string> {
  return new Promise((resolve) => {
    const listener = (line: string) => {
      const match = pattern.exec(line);
      if (!match) return;
      lineListeners.delete(listener);
      resolve(match[1] ?? line);
    };
    lineListeners.add(listener);
  });
}

/** Polls until the URL answers 200 (a service whose ready line is below the chosen log level). */
async function probe(url: string, everyMs: number, signal: AbortSignal): Promise<string> {
  while (!signal.aborted) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      await response.arrayBuffer();
      if (response.status === 200) return new URL(url).origin;
    } catch {
      // Not listening yet.
    }
    await sleep(everyMs);
  }
  return new URL(url).origin;
}

/** A port free on 127.0.0.1 right now, for a child that must be told its port in advance. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  await once(server, 'close');
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
