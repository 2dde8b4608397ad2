import { ConfigError, loadConfig } from '../config/load-config.js';
import { createLogger } from './logger.js';
import { startService } from './service.js';

/** Starts the service from the deployment file and the environment, and stops it on a signal. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`Configuration error: ${error.message}\n`);
      process.exit(78);
    }
    throw error;
  }
  const logger = createLogger(config.log.level);
  const service = await startService(config, logger).catch((error: Error) => {
    if (error instanceof ConfigError) {
      logger.error(`Configuration error: ${error.message}`);
      process.exit(78);
    }
    logger.error(`start-up failed: ${error.message}`, { stack: error.stack });
    process.exit(1);
  });
  logger.info(`svc-agent listening on ${service.url} (OpenAI base URL ${service.url}/v1), LLM server ${config.llm.base_url}, database ${service.database.kind}`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn(`${signal} again: stopping now`);
      process.exit(1);
    }
    stopping = true;
    logger.info(`${signal}: stopping`);
    service.close().then(
      () => process.exit(0),
      (error: Error) => {
        logger.error(`shutdown failed: ${error.message}`, { stack: error.stack });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

await main();
