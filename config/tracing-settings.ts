import type { TracingSettings } from '../runtime/observability/tracing.js';
import type { ConfigValues } from './schema.js';

/**
 * Where spans are sent, or undefined when tracing is off: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as
 * is, else `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces` (as the OpenTelemetry SDKs do), unless
 * `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true`.
 */
export function tracesUrlOf(tracing: ConfigValues['tracing']): string | undefined {
  if (tracing.exporter === 'none' || tracing.sdk_disabled) return undefined;
  if (tracing.traces_endpoint !== '') return tracing.traces_endpoint;
  if (tracing.endpoint !== '') return `${tracing.endpoint.replace(/\/+$/, '')}/v1/traces`;
  return undefined;
}

/** `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs separated by commas, values URL-encoded. */
export function otlpHeadersOf(text: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    const value = pair.slice(at + 1).trim();
    let decoded = value;
    try {
      decoded = decodeURIComponent(value);
    } catch {
      // a value that is not URL-encoded is taken as written
    }
    headers[pair.slice(0, at).trim()] = decoded;
  }
  return headers;
}

/** The tracing settings of a configuration, or undefined when tracing is off (loadConfig refused `grpc` already). */
export function tracingSettingsOf(config: Pick<ConfigValues, 'tracing' | 'llm'>): TracingSettings | undefined {
  const { tracing } = config;
  const url = tracesUrlOf(tracing);
  if (url === undefined || tracing.protocol === 'grpc') return undefined;
  return {
    url,
    protocol: tracing.protocol,
    headers: otlpHeadersOf(tracing.headers),
    timeoutMs: tracing.timeout_ms,
    serviceName: tracing.service_name,
    sampler: tracing.sampler,
    samplerArg: tracing.sampler_arg,
    batch: {
      scheduledDelayMillis: tracing.bsp_schedule_delay_ms,
      exportTimeoutMillis: tracing.bsp_export_timeout_ms,
      maxQueueSize: tracing.bsp_max_queue_size,
      maxExportBatchSize: tracing.bsp_max_export_batch_size,
    },
    captureContent: tracing.capture_message_content,
    llmBaseUrl: config.llm.base_url,
  };
}
