import type { Tracing, TracingSettings } from './tracing.js';

/**
 * Starts tracing. The OpenTelemetry SDK and exporter are imported here, on first use: a service
 * with tracing off never loads them, and its turn path only checks that it has no `Tracing`.
 * `onError` hears what goes wrong in the SDK (an export the collector refused or never took),
 * at most once a minute.
 */
export async function startTracing(settings: TracingSettings, onError: (message: string) => void): Promise<Tracing> {
  const { createOtelTracing } = await import('./otel-tracing.js');
  return createOtelTracing(settings, onError);
}
