import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import winston from 'winston';
import { logLineFormat } from '../../gateway/server/logger.js';
import { startTestService } from './service-harness.js';

/**
 * Run as a process of its own by the tracing e2e test: the service with tracing off (the OTEL_*
 * variables it is given), one chat turn sent with a traceparent, then a report on stdout: which
 * OpenTelemetry modules the process loaded, how many LLM requests carried a traceparent and how
 * many log lines a trace id. A process of its own, because the test's own has loaded the SDK.
 */
const traced: string[] = [];
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    if (chunk.toString().includes('"trace_id"')) traced.push(chunk.toString());
    done();
  },
});
const logger = winston.createLogger({ level: 'info', format: logLineFormat('json'), transports: [new winston.transports.Stream({ stream: sink })] });
const env: NodeJS.ProcessEnv = {};
for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_TRACES_EXPORTER', 'OTEL_SDK_DISABLED']) if (process.env[name] !== undefined) env[name] = process.env[name];
const harness = await startTestService({ env, logger });
const completion = await harness.client.chat.completions.create(
  { model: 'test-model', messages: [{ role: 'user', content: 'Hello' }] },
  { headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' } },
);
const traceparents = harness.llm.requests.filter((request) => request.headers.traceparent !== undefined).length;
await harness.close();
const loaded = Object.keys(createRequire(import.meta.url).cache).filter((path) => path.includes('/node_modules/@opentelemetry/'));
process.stdout.write(`${JSON.stringify({ loaded, traceparents, traceIds: traced.length, answered: typeof completion.choices[0]?.message.content === 'string' })}\n`);
