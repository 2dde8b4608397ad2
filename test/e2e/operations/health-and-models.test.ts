import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { expectSchema } from '../../support/openai-schema.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

/** A stand-in LLM server whose /v1/models answers with `status`, or never when `status` is null. */
async function modelsServer(status: number | null): Promise<{ url: string; server: Server }> {
  const server = createServer((_req, res) => {
    if (status === null) return; // never answers
    res.writeHead(status, { 'Content-Type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, server };
}

async function closedPortUrl(): Promise<string> {
  const { url, server } = await modelsServer(200);
  await new Promise((resolve) => server.close(resolve));
  return url;
}

async function health(harness: TestService) {
  const response = await fetch(`${harness.service.url}/health`);
  expect(response.status).to.equal(200);
  return (await response.json()) as { status: string; llm_server: string; port: number };
}

describe('GET /health', () => {
  let harness: TestService;
  before(async () => {
    harness = await startTestService();
  });
  after(async () => harness?.close());

  it('reports running with the port, and nothing still starting, when the LLM server answers 200', async () => {
    const body = await health(harness);
    expect(body).to.deep.include({ status: 'ok', llm_server: 'running', port: harness.service.port, starting: [] });
    expect(Object.keys(body).sort()).to.deep.equal(['llm', 'llm_server', 'port', 'starting', 'status']);
  });

  it('shows what it learnt of the LLM server: the scripted one names its model and tells no context window', async () => {
    const { llm } = (await health(harness)) as unknown as { llm: Record<string, unknown> };
    expect(llm).to.deep.include({ model: 'fake-model', context_window: null, context_window_source: null, tools_in_prompt: false, alternate_roles: false });
  });

  it('reports error when the LLM server answers another status', async () => {
    const upstream = await modelsServer(500);
    const body = await healthAgainst(upstream.url);
    expect(body).to.include({ status: 'ok', llm_server: 'error' });
    upstream.server.close();
  });

  it('reports not_running when the LLM server cannot be reached', async () => {
    expect(await healthAgainst(await closedPortUrl())).to.include({ status: 'ok', llm_server: 'not_running' });
  });

  it('reports not_running after the 2-second time-out when the LLM server hangs', async () => {
    const upstream = await modelsServer(null);
    let waitedMs = 0;
    const body = await healthAgainst(upstream.url, (ms) => (waitedMs = ms));
    expect(body).to.include({ status: 'ok', llm_server: 'not_running' });
    // The service gave up on its own time-out: not before 2 s, and not much after.
    expect(waitedMs).to.be.within(1900, 3500);
    upstream.server.closeAllConnections();
    upstream.server.close();
  });

  /** Starts a second service whose LLM base URL is `url` and asks its health. */
  async function healthAgainst(url: string, onWaited?: (ms: number) => void) {
    const other = await startTestService({ llm: harness.llm, env: { LLM_BASE_URL: url } });
    try {
      const started = performance.now();
      const body = await health(other);
      onWaited?.(performance.now() - started);
      return body;
    } finally {
      await other.close();
    }
  }
});

describe('GET /v1/models', () => {
  let harness: TestService;
  before(async () => {
    harness = await startTestService();
  });
  after(async () => harness?.close());

  it('lists svc-agent and svc-default for the openai client', async () => {
    const ids = [];
    for await (const model of harness.client.models.list()) ids.push(model.id);
    expect(ids).to.deep.equal(['svc-agent', 'svc-default']);
    expectSchema('ListModelsResponse', await (await fetch(`${harness.baseURL}/models`)).json());
  });

  it('answers one model and 404 for an unknown one', async () => {
    const model = await harness.client.models.retrieve('svc-agent');
    expectSchema('Model', model);
    expect(model.id).to.equal('svc-agent');
    const response = await fetch(`${harness.baseURL}/models/gpt-9`);
    expect(response.status).to.equal(404);
    expectSchema('ErrorResponse', await response.json());
  });
});
