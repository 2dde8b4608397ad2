import { ConfigError } from '../../config/load-config.js';
import { ServiceError } from '../service-error.js';
import type { LongTermMemory } from './long-term-memory.js';

/**
 * Long-term memory made once `choose` has chosen its embedder, which may ask the LLM server:
 * the choice starts now and goes on in the background, and `ready()` waits for it. A choice
 * that failed is made again at the next `ready()`, unless the configuration is at odds with
 * the stored memories (a ConfigError): then long-term memory stays unavailable until the
 * service restarts with another configuration.
 */
export function createDeferredMemory(choose: () => Promise<LongTermMemory>): LongTermMemory {
  let memory: LongTermMemory | undefined;
  let choosing: Promise<void> | undefined;
  let lasting: ServiceError | undefined;
  const attempt = (): Promise<void> =>
    (choosing ??= choose().then(
      (chosen) => {
        memory = chosen;
      },
      (error: unknown) => {
        choosing = undefined;
        const unavailable = memoryUnavailable(error);
        if (error instanceof ConfigError) lasting = unavailable;
        throw unavailable;
      },
    ));
  const ready = async (): Promise<void> => {
    if (memory) return;
    if (lasting) throw lasting;
    await attempt();
  };
  // The failure is reported to the turns that wait for the choice.
  attempt().catch(() => undefined);
  return {
    ready,
    async recall(userId, text) {
      try {
        await ready();
      } catch {
        return [];
      }
      return memory!.recall(userId, text);
    },
    async consolidate(exchange) {
      await ready();
      return memory!.consolidate(exchange);
    },
  };
}

/** The error turns get: a configuration at odds with the memories says what to change; another failure (the database's, say) stays in the log. */
function memoryUnavailable(error: unknown): ServiceError {
  if (error instanceof ConfigError) return new ServiceError('MEMORY_UNAVAILABLE', `long-term memory is unavailable: ${error.message}`, { cause: error });
  return new ServiceError('MEMORY_UNAVAILABLE', 'long-term memory is not available yet; try again shortly', { cause: error, headers: { 'Retry-After': '1' } });
}
