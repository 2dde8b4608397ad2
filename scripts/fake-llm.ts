import { parseArgs } from 'node:util';
import type { FakeLlmOptions } from './fake-llm-server.js';
import { startFakeLlm } from './fake-llm-server.js';

const USAGE = `Usage: npm run dev:llm -- [options]
  --port N            port to listen on (default 30000; 0 picks a free one)
  --host H            address to listen on (default 127.0.0.1)
  --model ID          model id served by /v1/models (default fake-model)
  --api-key KEY       require Authorization: Bearer KEY
  --pace MS           pause between streamed pieces (default 0)
  --dimensions N      embedding size (default 256)
  --no-embeddings     answer /v1/embeddings with 404
Magic words in the last user message: [[tool:NAME {json}]] [[error:503]] [[slow:MS]]
[[pace:MS]] [[cut:N]] [[hang]] [[echo-context]]; otherwise the reply is "Echo: <message>".
Offered transfer_to_<state> tools, it hands over once a turn: to NAME for [[transfer:NAME]],
else to the first state whose name the message mentions (billing: "a billing question").`;

/** The server options given by the command-line flags. */
function parseFakeLlmArgs(args: string[]): FakeLlmOptions & { help: boolean } {
  const { values } = parseArgs({
    args,
    strict: true,
    options: {
      port: { type: 'string', default: '30000' },
      host: { type: 'string', default: '127.0.0.1' },
      model: { type: 'string' },
      'api-key': { type: 'string' },
      pace: { type: 'string' },
      dimensions: { type: 'string' },
      'no-embeddings': { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  return {
    help: values.help,
    port: integerFlag('--port', values.port),
    host: values.host,
    model: values.model,
    apiKey: values['api-key'],
    pieceDelayMs: values.pace === undefined ? undefined : integerFlag('--pace', values.pace),
    embeddingDimensions: values.dimensions === undefined ? undefined : integerFlag('--dimensions', values.dimensions),
    embeddings: !values['no-embeddings'],
  };
}

function integerFlag(name: string, value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0) throw new Error(`${name} must be a non-negative integer, got '${value}'`);
  return number;
}

async function main(): Promise<void> {
  const { help, ...options } = parseFakeLlmArgs(process.argv.slice(2));
  if (help) {
    console.log(USAGE);
    return;
  }
  const fake = await startFakeLlm({ ...options, record: false });
  console.log(`fake LLM listening on ${fake.url}`);
  const stop = (): void => {
    fake.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(`fake LLM: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
