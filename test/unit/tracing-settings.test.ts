import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../config/load-config.js';
import { otlpHeadersOf, tracingSettingsOf } from '../../config/tracing-settings.js';
import { inputMessagesOf, outputMessagesOf, systemInstructionsOf } from '../../runtime/observability/genai-messages.js';

describe('tracing settings (OTEL_* variables)', () => {
  it('leaves tracing off when no OTLP endpoint is set', () => {
    expect(tracingSettingsOf(loadConfig({}))).to.equal(undefined);
  });

  it('sends to <endpoint>/v1/traces, or to the traces endpoint as is, when one is set', () => {
    expect(tracingSettingsOf(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }))?.url).to.equal('http://collector:4318/v1/traces');
    const both = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://cloud.langfuse.com/api/public/otel/v1/traces' };
    expect(tracingSettingsOf(loadConfig(both))?.url).to.equal('https://cloud.langfuse.com/api/public/otel/v1/traces');
  });

  it('stays off when OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true, whatever the endpoint', () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(tracingSettingsOf(loadConfig({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }))).to.equal(undefined);
    expect(tracingSettingsOf(loadConfig({ ...endpoint, OTEL_SDK_DISABLED: 'true' }))).to.equal(undefined);
  });

  it('reads the protocol, the sampler, the batch settings and the capture variable, the traces-only variables winning', () => {
    const settings = tracingSettingsOf(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'billing-agent',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_BSP_MAX_QUEUE_SIZE: '100',
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
      }),
    );
    expect(settings).to.include({ protocol: 'http/json', serviceName: 'billing-agent', sampler: 'parentbased_traceidratio', samplerArg: 0.25, captureContent: true });
    expect(settings?.batch).to.include({ scheduledDelayMillis: 200, maxQueueSize: 100, maxExportBatchSize: 512, exportTimeoutMillis: 30_000 });
  });

  it('refuses grpc with a configuration error when tracing is on, and ignores it when off', () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).to.throw(ConfigError, /grpc is not supported/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).not.to.throw();
  });

  it('refuses a sampler ratio outside 0 to 1 and an unknown sampler', () => {
    expect(() => loadConfig({ OTEL_TRACES_SAMPLER_ARG: '2' })).to.throw(ConfigError, /sampler_arg/);
    expect(() => loadConfig({ OTEL_TRACES_SAMPLER: 'jaeger_remote' })).to.throw(ConfigError, /sampler/);
  });

  it('reads OTEL_EXPORTER_OTLP_HEADERS as comma-separated name=value pairs with URL-encoded values', () => {
    expect(otlpHeadersOf('Authorization=Basic%20cGs6c2s=, x-tenant = acme ,broken')).to.deep.equal({ Authorization: 'Basic cGs6c2s=', 'x-tenant': 'acme' });
  });
});

describe('GenAI message attributes', () => {
  const messages = [
    { role: 'system' as const, content: 'Be brief.' },
    { role: 'user' as const, content: [{ type: 'text' as const, text: 'Sum 2 and 3' }] },
    { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'calc__sum', arguments: '{"a":2,"b":3}' } }] },
    { role: 'tool' as const, tool_call_id: 'call_1', content: '5' },
  ];

  it('gives the system messages as system instructions and the rest as role and parts', () => {
    expect(systemInstructionsOf(messages)).to.deep.equal([{ type: 'text', content: 'Be brief.' }]);
    expect(inputMessagesOf(messages)).to.deep.equal([
      { role: 'user', parts: [{ type: 'text', content: 'Sum 2 and 3' }] },
      { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'calc__sum', arguments: { a: 2, b: 3 } }] },
      { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: '5' }] },
    ]);
  });

  it('gives a reply as one assistant message with its reasoning, text, calls and finish reason', () => {
    const reply = { content: 'It is 5.', reasoning: 'Add them.', toolCalls: [], finishReason: 'stop', usage: null, repairs: [] };
    expect(outputMessagesOf(reply)).to.deep.equal([
      { role: 'assistant', parts: [{ type: 'reasoning', content: 'Add them.' }, { type: 'text', content: 'It is 5.' }], finish_reason: 'stop' },
    ]);
  });
});
