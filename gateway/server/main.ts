import cluster from 'node:cluster';
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig, type AppConfig } from '../../config/load-config.js';
import { parseApiKeys } from '../http/api-keys.js';
import { runPrimary } from './cluster.js';
import { createLogger } from './logger.js';
import { metricsHandlers } from '../operations/metrics-route.js';
import { DataDirInUseError } from '../../storage/index.js';
import { startService } from './service.js';
import { startLine } from './start-line.js';
import { CANNOT_LISTEN_EXIT_CODE, cannotListenLine } from './listen-failure.js';
import { limitHandlers } from '../http/usage-limits.js';

/**
 * Starts the service from the deployment file and the environment: one process, or with
 * `app.workers` > 1 a primary that runs that many workers. Stops gracefully on a signal.
 */
async function main(): Promise<void> {
  let config: AppConfig;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  if (config.app.workers > 1 && cluster.isPrimary) {
    const logger = createLogger(config.log, 'primary');
    // The workers ask the primary for what is counted once per instance: limits and metrics.
    const handlers = { ...limitHandlers(config.limits), ...metricsHandlers() };
    const code = await runPrimary(config, logger, { handlers }).catch((error: Error) => {
      const cannotListen = cannotListenLine(error, config.app);
      if (cannotListen) {
        logger.error(cannotListen);
        return CANNOT_LISTEN_EXIT_CODE;
      }
      logger.error(`start-up failed: ${error.message}`, { stack: error.stack });
      return 1;
    });
    process.exit(code);
  }
  await serve(config);
}

/** One process serving requests: the whole service, or one worker of several. */
async function serve(config: AppConfig): Promise<void> {
  const worker = cluster.isWorker ? `worker ${process.env.SVC_WORKER_INDEX ?? cluster.worker?.id}` : undefined;
  const logger = createLogger(config.log, worker);
  // A worker is handed its connections by the primary (gateway/server/connection-handoff.ts).
  const handedConnections = worker ? { publicPort: Number(process.env.SVC_PUBLIC_PORT) } : undefined;
  const starting = startService(config, logger, { handedConnections }).catch((error: Error) => {
    if (error instanceof ConfigError) {
      logger.error(`Configuration error: ${error.message}`);
      process.exit(78);
    }
    if (error instanceof DataDirInUseError) {
      logger.error(`start-up refused: ${error.message}`);
      process.exit(1);
    }
    // A worker listens on a port of its own on loopback: only a whole service's listening is the operator's to fix.
    const cannotListen = worker ? undefined : cannotListenLine(error, config.app);
    if (cannotListen) {
      logger.error(cannotListen);
      process.exit(CANNOT_LISTEN_EXIT_CODE);
    }
    logger.error(`start-up failed: ${error.message}`, { stack: error.stack });
    process.exit(1);
  });

  // Signals are handled from the start: one that comes during start-up stops the service once it is up.
  let stopping = false;
  const stop = (reason: string) => {
    if (stopping) {
      logger.warn(`${reason} again: stopping now`);
      process.exit(1);
    }
    stopping = true;
    logger.info(`${reason}: stopping (turns in flight may take up to ${config.app.shutdown_timeout_ms} ms)`);
    starting.then((service) => service.close()).then(
      () => process.exit(0),
      (error: Error) => {
        logger.error(`shutdown failed: ${error.message}`, { stack: error.stack });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  if (worker) {
    // Ctrl-C reaches the whole process group: the primary decides, and sends SIGTERM.
    process.on('SIGINT', () => undefined);
    // The primary is gone (killed): nobody will send SIGTERM any more.
    process.on('disconnect', () => {
      if (!stopping) stop('primary process gone');
    });
  } else {
    process.on('SIGINT', () => stop('SIGINT'));
  }

  const service = await starting;
  if (!worker) {
    logger.info(
      startLine({
        bound: service.server.address() as AddressInfo,
        workers: 1,
        localMode: parseApiKeys(config.auth.api_keys).length === 0,
        llmBaseUrl: config.llm.base_url,
        database: service.database.kind,
      }),
    );
  }
}

await main();
