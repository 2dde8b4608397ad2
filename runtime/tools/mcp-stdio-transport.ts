import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { ReadBuffer } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { McpClientSdk } from './mcp-client-sdk.js';

/** How to start a tool server process. */
export type StdioProcessParams = {
  command: string;
  args?: string[];
  /** Added to the small safe default environment (PATH, HOME, …); the service's own is not inherited. */
  env?: Record<string, string>;
  cwd?: string;
  /** How long `close()` waits after closing stdin, and again after SIGTERM, before escalating. */
  killGraceMs?: number;
};

const STDERR_TAIL_LINES = 20;
const isWindows = process.platform === 'win32';

/** Process groups still alive, killed when the service exits without closing them. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const pgid of liveGroups) signalGroup(pgid, 'SIGKILL');
  });
}

/** Signals every process of the group led by `pgid`; false when the group no longer exists. */
function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(isWindows ? pgid : -pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Whether every process of the group has ended (or is a zombie) within `ms`. */
async function groupEndsWithin(pgid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (signalGroup(pgid, 0) && !allZombies(pgid)) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

/** True when every member of the group is a zombie (dead, waiting for its new parent to reap it). */
function allZombies(pgid: number): boolean {
  if (process.platform !== 'linux') return false;
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue; // it ended while we looked
      }
      // "pid (comm) state ppid pgrp ...": the fields after the command name.
      const [state, , group] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(group) === pgid && state !== 'Z') return false;
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * MCP client transport over a child's stdin/stdout, like the SDK's StdioClientTransport,
 * except that the child leads its own process group and the whole group is killed when
 * the transport closes or the child exits, so a server's helpers never outlive it.
 */
export class ProcessGroupStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T) => void;

  private child: ChildProcess | undefined;
  private readonly readBuffer: ReadBuffer;
  private readonly stderrLines: string[] = [];
  private stderrPartial = '';
  private exited: Promise<void> = Promise.resolve();
  private exitCode: number | null = null;
  private exitSignal: NodeJS.Signals | null = null;
  private isClosing = false;
  private reaping: Promise<void> | undefined;
  private readonly killGraceMs: number;

  constructor(
    private readonly params: StdioProcessParams,
    /** The SDK's stdio framing and safe environment (the transport is the SDK's but for the process group). */
    private readonly sdk: Pick<McpClientSdk, 'ReadBuffer' | 'serializeMessage' | 'getDefaultEnvironment'>,
  ) {
    this.killGraceMs = params.killGraceMs ?? 1000;
    this.readBuffer = new sdk.ReadBuffer();
  }

  /** The child's pid (also its process group id) once started. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last lines the child wrote to stderr, for error messages. */
  get stderrTail(): string {
    return [...this.stderrLines, this.stderrPartial].filter(Boolean).join('\n');
  }

  /** How the child ended, once it has: `code 3` or `signal SIGKILL`. */
  get exitDescription(): string | undefined {
    if (this.exitCode !== null) return `code ${this.exitCode}`;
    if (this.exitSignal !== null) return `signal ${this.exitSignal}`;
    return undefined;
  }

  start(): Promise<void> {
    if (this.child) throw new Error('ProcessGroupStdioTransport already started');
    return new Promise((resolve, reject) => {
      const child = spawn(this.params.command, this.params.args ?? [], {
        env: { ...this.sdk.getDefaultEnvironment(), ...this.params.env },
        cwd: this.params.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        // Its own process group, so close() can signal the server and everything it started.
        detached: !isWindows,
        windowsHide: true,
      });
      this.child = child;
      let spawned = false;
      let leaderExited!: () => void;
      this.exited = new Promise((done) => (leaderExited = done));

      child.once('spawn', () => {
        spawned = true;
        if (child.pid !== undefined) {
          liveGroups.add(child.pid);
          installExitHook();
        }
        resolve();
      });
      child.on('error', (error) => {
        if (!spawned) {
          leaderExited();
          reject(error);
        } else {
          this.onerror?.(error);
        }
      });
      child.once('exit', (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        leaderExited();
        // The leader is gone; helpers it left behind may still hold the pipes open.
        if (child.pid !== undefined) void this.reapGroup(child.pid);
      });
      child.once('close', () => {
        this.child = undefined;
        this.onclose?.();
      });
      child.stdin?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('error', (error) => this.onerror?.(error));
      child.stdout?.on('data', (chunk: Buffer) => {
        this.readBuffer.append(chunk);
        this.drainReadBuffer();
      });
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (text: string) => this.keepStderr(text));
    });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed || this.isClosing) throw new Error('Not connected');
    await new Promise<void>((resolve, reject) => {
      stdin.write(this.sdk.serializeMessage(message), (error) => (error ? reject(error) : resolve()));
    });
  }

  /** Ends stdin, then escalates to SIGTERM and SIGKILL of the whole group; resolves when the child has exited. */
  async close(): Promise<void> {
    const child = this.child;
    if (!child || this.isClosing) {
      await this.exited;
      return;
    }
    this.isClosing = true;
    try {
      child.stdin?.end();
    } catch {
      // the pipe may already be broken; the signals below still apply
    }
    if (!(await this.exitsWithin(this.killGraceMs)) && child.pid !== undefined) {
      signalGroup(child.pid, 'SIGTERM');
      if (!(await this.exitsWithin(this.killGraceMs))) signalGroup(child.pid, 'SIGKILL');
    }
    await this.exited;
    if (child.pid !== undefined) await this.reapGroup(child.pid);
    this.readBuffer.clear();
  }

  private async exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    const result = await Promise.race([this.exited.then(() => true as const), timedOut]);
    clearTimeout(timer);
    return result;
  }

  /** Terminates what is left of the group after its leader exited: SIGTERM, then SIGKILL after the grace time. */
  private reapGroup(pgid: number): Promise<void> {
    this.reaping ??= this.terminateGroup(pgid);
    return this.reaping;
  }

  private async terminateGroup(pgid: number): Promise<void> {
    if (isWindows) return;
    if (signalGroup(pgid, 'SIGTERM') && !(await groupEndsWithin(pgid, this.killGraceMs))) {
      signalGroup(pgid, 'SIGKILL');
      // SIGKILL is delivered asynchronously: wait (bounded) until the members are really gone.
      await groupEndsWithin(pgid, this.killGraceMs);
    }
    liveGroups.delete(pgid);
  }

  private drainReadBuffer(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.readBuffer.readMessage();
      } catch (error) {
        this.onerror?.(error instanceof Error ? error : new Error(String(error)));
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  private keepStderr(text: string): void {
    const lines = (this.stderrPartial + text).split('\n');
    this.stderrPartial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim()) this.stderrLines.push(line.trimEnd());
    }
    this.stderrLines.splice(0, Math.max(0, this.stderrLines.length - STDERR_TAIL_LINES));
    this.stderrPartial = this.stderrPartial.slice(-2000);
  }
}
