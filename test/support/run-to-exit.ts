import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/** How a program run to its end ended: its exit code and what it printed. */
export type ProgramRun = { code: number | null; stdout: string; stderr: string };

/** Runs a program with stdin closed until it exits and its output is read; rejects when it cannot be started. */
export function runToExit(file: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<ProgramRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** Kills a child that is still running (SIGKILL) and waits until it has exited; a child that already exited is left as it is. */
export async function killToExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}
