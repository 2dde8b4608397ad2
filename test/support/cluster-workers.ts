import { readFileSync } from 'node:fs';
import { isProcessAlive } from './wait-for.js';

/**
 * The living cluster workers of a primary: its child processes that node's cluster forked
 * (each has NODE_UNIQUE_ID), not its other children such as tsx's esbuild service, which a
 * primary starts after a compile-cache miss.
 */
export function clusterWorkersOf(primaryPid: number): number[] {
  let children: string;
  try {
    children = readFileSync(`/proc/${primaryPid}/task/${primaryPid}/children`, 'utf8').trim();
  } catch {
    return [];
  }
  // A killed worker stays a zombie until the primary reaps it: only living ones count.
  return children === '' ? [] : children.split(/\s+/).map(Number).filter(isProcessAlive).filter(isClusterWorker);
}

function isClusterWorker(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').some((entry) => entry.startsWith('NODE_UNIQUE_ID='));
  } catch {
    return false;
  }
}
