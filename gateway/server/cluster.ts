import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'winston';
import type { AppConfig } from '../../config/load-config.js';
import { createDatabase, migrateToLatest } from '../../storage/index.js';
import { parseApiKeys } from '../http/api-keys.js';
import { servePrimary, type RpcHandler } from './cluster-rpc.js';
import { dispatchConnections } from './connection-handoff.js';
import { startLine } from './start-line.js';

/** Restarts allowed in `RESTART_WINDOW_MS` before the next one waits `RESTART_PAUSE_MS`. */
const RESTART_BURST = 5;
const RESTART_WINDOW_MS = 30_000;
const RESTART_PAUSE_MS = 1_000;
/** Beyond the shutdown time-out, how long a stopping worker may take to flush and close. */
const CLOSE_MARGIN_MS = 15_000;

/** The primary's jobs for its workers: what they ask over IPC (limits, metrics). */
export type PrimaryOptions = { handlers?: Record<string, RpcHandler> };

/**
 * The primary process of `app.workers` > 1: migrates the database once, listens, forks the
 * workers and hands them the connections, replaces a worker that dies, and on SIGTERM or SIGINT stops them
 * gracefully (each finishes its turns, flushes and closes); a second signal kills them.
 * Resolves with the exit code once every worker has stopped.
 */
export async function runPrimary(config: AppConfig, logger: Logger, options: PrimaryOptions = {}): Promise<number> {
  await migrateOnce(config);
  // The primary accepts the connections and hands each to the worker holding the fewest.
  const dispatcher = await dispatchConnections(config.app.port, config.app.host);
  const stopServing = servePrimary(options.handlers ?? {});
  const wanted = config.app.workers;
  const started = new Set<Worker>();
  const ready = new Set<Worker>();
  const restarts: number[] = [];
  let stopping = false;
  let failed = false;
  /** Every worker took connections once: start-up is over, and a worker that dies from now on is replaced. */
  let up = false;

  const fork = (index: number) => {
    const worker = cluster.fork({ SVC_WORKER_INDEX: String(index), SVC_PUBLIC_PORT: String(dispatcher.address.port) });
    started.add(worker);
    dispatcher.add(worker, () => {
      ready.add(worker);
      if (up) logger.info(`worker ${index} (pid ${worker.process.pid}) listening`);
      else if (ready.size === wanted) {
        up = true;
        const localMode = parseApiKeys(config.auth.api_keys).length === 0;
        logger.info(startLine({ bound: dispatcher.address, workers: wanted, localMode, llmBaseUrl: config.llm.base_url, database: 'pg' }));
      }
    });
    worker.once('exit', (code, signal) => {
      started.delete(worker);
      ready.delete(worker);
      if (stopping) return;
      const how = signal ? `signal ${signal}` : `code ${code}`;
      if (!up) {
        // A worker that dies at start-up (port taken, database refused) would do so again.
        logger.error(`worker ${index} (pid ${worker.process.pid}) exited with ${how} before listening: stopping`);
        failed = true;
        void stop('start-up failure');
        return;
      }
      const now = Date.now();
      while (restarts.length > 0 && restarts[0]! < now - RESTART_WINDOW_MS) restarts.shift();
      restarts.push(now);
      const pause = restarts.length > RESTART_BURST ? RESTART_PAUSE_MS : 0;
      logger.warn(`worker ${index} (pid ${worker.process.pid}) exited with ${how}: starting a new one${pause ? ` in ${pause} ms` : ''}`);
      setTimeout(() => {
        if (!stopping) fork(index);
      }, pause);
    });
  };

  let done!: (code: number) => void;
  const finished = new Promise<number>((resolve) => {
    done = resolve;
  });

  const stop = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`${reason}: stopping ${started.size} workers`);
    const exits = [...started].map((worker) => exitOf(worker));
    dispatcher.close();
    for (const worker of started) worker.process.kill('SIGTERM');
    const deadline = setTimeout(() => {
      logger.warn('workers did not stop in time: killing them');
      for (const worker of started) worker.process.kill('SIGKILL');
    }, config.app.shutdown_timeout_ms + CLOSE_MARGIN_MS);
    const codes = await Promise.all(exits);
    clearTimeout(deadline);
    codes.forEach((code, index) => {
      if (code !== 0) logger.warn(`a worker stopped with code ${code}`);
    });
    stopServing();
    done(failed || codes.some((code) => code !== 0) ? 1 : 0);
  };

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals === 1) {
      void stop(signal);
      return;
    }
    logger.warn(`${signal} again: killing the workers`);
    for (const worker of started) worker.process.kill('SIGKILL');
    done(1);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  for (let index = 1; index <= wanted; index += 1) fork(index);
  return finished;
}

/** One migration run before the workers start, so they do not race for it and a bad database stops start-up once. */
async function migrateOnce(config: AppConfig): Promise<void> {
  const vector = config.memory.use_long_term;
  const database = await createDatabase({ url: config.database.url, dataDir: config.database.data_dir, vector, poolSize: 1 });
  try {
    await migrateToLatest(database, { vector, embeddingDimensions: config.memory.embedding_dimensions });
  } finally {
    await database.close();
  }
}

function exitOf(worker: Worker): Promise<number> {
  if (worker.isDead()) return Promise.resolve(worker.process.exitCode ?? 1);
  return new Promise((resolve) => worker.once('exit', (code, signal) => resolve(signal ? 1 : (code ?? 1))));
}
