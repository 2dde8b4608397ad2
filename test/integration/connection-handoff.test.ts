import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { Client } from 'undici';
import { dispatchConnections, type ConnectionDispatcher } from '../../gateway/server/connection-handoff.js';
import { waitFor } from '../support/wait-for.js';

const WORKER_SCRIPT = fileURLToPath(new URL('../support/handoff-cluster-worker.ts', import.meta.url));

describe('connections handed from the primary to the workers', function () {
  this.timeout(30_000);
  const workers: Worker[] = [];
  const clients: Client[] = [];
  let dispatcher: ConnectionDispatcher | undefined;

  before(() => cluster.setupPrimary({ exec: WORKER_SCRIPT, execArgv: ['--import', 'tsx'] }));
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.destroy()));
    dispatcher?.close();
    dispatcher = undefined;
    await Promise.all(
      workers.splice(0).map(async (worker) => {
        if (worker.isDead()) return;
        const exited = once(worker, 'exit');
        worker.process.kill('SIGKILL');
        await exited;
      }),
    );
  });

  /** Starts the dispatcher and `count` workers, resolving once every one accepts connections. */
  async function start(count: number, mode: 'serve' | 'stall'): Promise<ConnectionDispatcher> {
    const started = await dispatchConnections(0, '127.0.0.1');
    dispatcher = started;
    await Promise.all(
      Array.from({ length: count }, () => {
        const worker = cluster.fork({ HANDOFF_MODE: mode });
        workers.push(worker);
        return new Promise<void>((resolve) => started.add(worker, resolve));
      }),
    );
    return started;
  }

  /** Opens a connection of its own and asks which worker serves it. */
  async function workerOfNewConnection(port: number): Promise<number> {
    const client = new Client(`http://127.0.0.1:${port}`, { pipelining: 1 });
    clients.push(client);
    const { body } = await client.request({ method: 'GET', path: '/' });
    return Number(await body.text());
  }

  it('spreads a burst of connections evenly, counting each connection until it closes', async () => {
    const { address, held } = await start(3, 'serve');
    const pids = await Promise.all(Array.from({ length: 12 }, () => workerOfNewConnection(address.port)));
    const perWorker = new Map<number, number>();
    for (const pid of pids) perWorker.set(pid, (perWorker.get(pid) ?? 0) + 1);
    expect([...perWorker.values()]).to.deep.equal([4, 4, 4]);
    await waitFor(() => held().join() === '4,4,4', 'every hand-over to be taken');

    // Closing two connections of one worker makes it the one with the fewest: the next two go there.
    const [first] = workers;
    const itsClients = clients.filter((_, index) => pids[index] === first!.process.pid).slice(0, 2);
    await Promise.all(itsClients.map((client) => client.close()));
    await waitFor(() => held().join() === '2,4,4', 'the closes to be counted');
    expect(await workerOfNewConnection(address.port)).to.equal(first!.process.pid);
    expect(await workerOfNewConnection(address.port)).to.equal(first!.process.pid);
  });

  it('closes every connection handed to a worker that died before taking it, so no client hangs', async () => {
    // The worker blocks as soon as it says it accepts: every connection below goes to it and stays untaken.
    const { address, held } = await start(1, 'stall');
    const sockets = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const socket = net.connect(address.port, '127.0.0.1');
        // A reset is a break the client sees, as a close is.
        socket.on('error', () => undefined);
        await once(socket, 'connect');
        socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
        return socket;
      }),
    );
    const closed = sockets.map((socket) => new Promise((resolve) => (socket.closed ? resolve(null) : socket.once('close', resolve))));
    await waitFor(() => held().join() === '3', 'the three connections to be handed to the worker');
    workers[0]!.process.kill('SIGKILL');
    const outcome = await Promise.race([Promise.all(closed).then(() => 'closed'), new Promise((resolve) => setTimeout(() => resolve('hung'), 5_000))]);
    for (const socket of sockets) socket.destroy();
    expect(outcome).to.equal('closed');
  });
});
