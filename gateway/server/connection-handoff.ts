import type { Worker } from 'node:cluster';
import type { Server as HttpServer } from 'node:http';
import net, { type AddressInfo } from 'node:net';

/**
 * Client connections handed from the primary to its workers. The primary accepts each
 * connection (paused, nothing read) and passes it to the worker that holds the fewest, so
 * a burst of connections does not pile onto whichever worker woke first, as it does when
 * workers accept from a shared socket. Node's own round robin hands connections over too,
 * but one handed to a worker in the instant it dies is never closed and its client hangs;
 * here the primary keeps its copy of each connection until the worker says it took it, and
 * closes the copies a dead worker never took, so their clients see the break and can retry.
 */
const TAG = 'svc-agent-connection';

type ToWorker = { tag: typeof TAG; kind: 'connection'; id: number };
type ToPrimary = { tag: typeof TAG; kind: 'accepting' } | { tag: typeof TAG; kind: 'taken'; id: number } | { tag: typeof TAG; kind: 'closed' };

/** What the primary knows of one worker: the connections it holds, and those sent but not yet taken. */
type WorkerConnections = { accepting: boolean; open: number; sent: Map<number, net.Socket> };

export type ConnectionDispatcher = {
  /** Where the primary listens. */
  address: AddressInfo;
  /** Hands connections to `worker` once it says it accepts them (then `onAccepting` runs), until it exits. */
  add(worker: Worker, onAccepting: () => void): void;
  /** Connections each accepting worker holds, in the order they were added (for tests and logs). */
  held(): number[];
  /** Stops accepting connections; those already handed over stay with their workers. */
  close(): void;
};

/** The primary's side: listens on `port` and `host` and hands every connection to a worker. */
export async function dispatchConnections(port: number, host: string): Promise<ConnectionDispatcher> {
  const workers = new Map<Worker, WorkerConnections>();
  /** Connections that came while no worker accepted (start-up, every worker replaced at once). */
  const waiting: net.Socket[] = [];
  let nextId = 1;
  let closed = false;

  const handOver = (socket: net.Socket) => {
    if (socket.destroyed) return;
    let chosen: [Worker, WorkerConnections] | undefined;
    for (const entry of workers) {
      if (!entry[1].accepting) continue;
      if (!chosen || load(entry[1]) < load(chosen[1])) chosen = entry;
    }
    if (!chosen) {
      waiting.push(socket);
      socket.once('close', () => {
        const at = waiting.indexOf(socket);
        if (at >= 0) waiting.splice(at, 1);
      });
      return;
    }
    const [worker, connections] = chosen;
    const id = nextId++;
    connections.sent.set(id, socket);
    // The primary keeps its copy (`keepOpen`) until the worker says it took the connection.
    const message: ToWorker = { tag: TAG, kind: 'connection', id };
    worker.send(message, socket, { keepOpen: true }, (error) => {
      if (error) forget(connections, id);
    });
  };

  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    // The primary's copy is never read or written; whatever fails on it must not stop the primary.
    socket.on('error', () => socket.destroy());
    if (closed) socket.destroy();
    else handOver(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });

  return {
    address: server.address() as AddressInfo,
    add(worker, onAccepting) {
      const connections: WorkerConnections = { accepting: false, open: 0, sent: new Map() };
      workers.set(worker, connections);
      worker.on('message', (message: ToPrimary) => {
        if (message?.tag !== TAG) return;
        if (message.kind === 'accepting') {
          connections.accepting = true;
          onAccepting();
          for (const socket of waiting.splice(0)) handOver(socket);
        } else if (message.kind === 'taken') {
          if (forget(connections, message.id)) connections.open += 1;
        } else if (message.kind === 'closed') {
          connections.open = Math.max(0, connections.open - 1);
        }
      });
      // A worker that dies closes what it took; what it never took is closed here.
      worker.once('exit', () => {
        workers.delete(worker);
        for (const id of [...connections.sent.keys()]) forget(connections, id);
      });
    },
    held: () => [...workers.values()].filter((connections) => connections.accepting).map(load),
    close() {
      closed = true;
      for (const socket of waiting.splice(0)) socket.destroy();
      server.close();
    },
  };
}

function load(connections: WorkerConnections): number {
  return connections.open + connections.sent.size;
}

/** Closes the primary's copy of a connection sent to a worker; false if it was not pending. */
function forget(connections: WorkerConnections, id: number): boolean {
  const socket = connections.sent.get(id);
  if (!socket) return false;
  connections.sent.delete(id);
  // Closing this process's descriptor leaves the worker's copy open (no shutdown is sent).
  socket.destroy();
  return true;
}

/** What a worker sends the primary once it accepts connections. */
export const ACCEPTING: ToPrimary = { tag: TAG, kind: 'accepting' };

/** The connections a worker was handed, for draining: `server.close` does not wait for them. */
export type HandedConnections = { allClosed(): Promise<void> };

/**
 * The worker's side: every connection the primary hands over is served by `server`, as if
 * it had accepted it. `server` listens on a loopback port of its own, which nobody is told
 * about, so that Node tracks its connections (request time-outs, closing idle ones); its
 * keep-alive and headers time-outs (set where it is made, gateway/server/service.ts) apply to them.
 */
export function acceptHandedConnections(server: HttpServer): HandedConnections {
  const open = new Set<net.Socket>();
  let emptied: (() => void) | undefined;
  const tell = (message: ToPrimary) => {
    if (process.connected) process.send!(message);
  };
  process.on('message', (message: ToWorker, socket: net.Socket | undefined) => {
    if (message?.tag !== TAG || message.kind !== 'connection') return;
    tell({ tag: TAG, kind: 'taken', id: message.id });
    if (!socket) return;
    if (!server.listening) {
      // Draining: a connection sent before the primary stopped accepting is closed unanswered.
      socket.destroy();
      return;
    }
    open.add(socket);
    socket.once('close', () => {
      open.delete(socket);
      tell({ tag: TAG, kind: 'closed' });
      if (open.size === 0) emptied?.();
    });
    server.emit('connection', socket);
    socket.resume();
  });
  tell(ACCEPTING);
  return {
    allClosed: () =>
      open.size === 0
        ? Promise.resolve()
        : new Promise((resolve) => {
            emptied = resolve;
          }),
  };
}
