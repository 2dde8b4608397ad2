import type { Tracing, TracingSettings } from './tracing.js';

/**
 * Starts tracing. The OpenTelemetry SDK and exporter are imported here, on first use: a service
 * with tracing off never loads them, and its turn path only checks that it has no `Tracing`.
 */
export async function startTracing(settings: TracingSettings): Promise<Tracing> {
  const { createOtelTracing } = await import('./otel-tracing.js');
  return createOtelTracing(settings);
}
