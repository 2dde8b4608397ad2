import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { groupPids } from './cpu-usage.js';

/**
 * Waits until each of `workers` cluster workers of the service (process group `pgid`,
 * listening on `port`) is handed connections: it opens a batch of connections with a
 * request on each and looks, in /proc, which processes hold their server side. The
 * primary hands a new connection only to a worker that listens, so a connection pool made
 * before all of them listen would load the first ones only. Linux only; resolves with the
 * connections each worker held in the last batch.
 */
export async function waitForWorkers(origin: string, port: number, pgid: number, workers: number, timeoutMs = 60_000): Promise<number[]> {
  const deadline = performance.now() + timeoutMs;
  const connections = 4 * workers;
  for (;;) {
    const pool = new Pool(origin, { connections, pipelining: 1 });
    try {
      // Requests that all wait for each other's answers keep every connection of the batch open at once.
      await Promise.all(Array.from({ length: connections }, () => pool.request({ method: 'GET', path: '/v1/models' }).then((response) => response.body.text())));
      const held = [...serverSockets(port, groupPids(pgid)).values()].filter((count) => count > 0);
      if (held.length >= workers) return held;
      if (performance.now() > deadline) throw new Error(`only ${held.length} of ${workers} workers took connections within ${timeoutMs} ms`);
    } finally {
      await pool.destroy();
    }
    await sleep(250);
  }
}

/** For each pid, how many established TCP connections on local `port` it holds (the server side of connections to it). */
function serverSockets(port: number, pids: number[]): Map<number, number> {
  const inodes = establishedInodes(port);
  const held = new Map<number, number>();
  for (const pid of pids) {
    let count = 0;
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const target = readLink(`/proc/${pid}/fd/${fd}`);
        const inode = target && /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode && inodes.has(inode)) count += 1;
      }
    } catch {
      // The process is gone.
    }
    held.set(pid, count);
  }
  return held;
}

/** Inodes of the established TCP sockets whose local port is `port` (/proc/net/tcp and tcp6). */
function establishedInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const ESTABLISHED = '01';
      if (fields[1]!.endsWith(`:${hexPort}`) && fields[3] === ESTABLISHED) inodes.add(fields[9]!);
    }
  }
  return inodes;
}

function readLink(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined;
  }
}
