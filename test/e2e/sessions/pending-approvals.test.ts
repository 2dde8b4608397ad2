import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { AgentResource } from '../../../gateway/agents/agents-routes.js';
import type { InspectedSession } from '../../../gateway/inspect/inspect-routes.js';
import type { RuntimeEvents } from '../../../runtime/observability/event-bus.js';
import { startFakeLlm, type FakeLlm } from '../../../scripts/fake-llm-server.js';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { serviceStorageTargets, type StorageTarget } from '../../support/service-storage.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

/** The key the harness's OpenAI client sends: with it configured, the agent endpoints are open to the tests. */
const KEY = 'placeholder';
const SUM_REQUEST = 'Add them up [[tool:everything__get-sum {"a":2,"b":3}]]';

for (const target of serviceStorageTargets()) {
  describe(`pending tool approvals in the stored session (${target.name})`, () => {
    let folder: string;
    let llm: FakeLlm;
    let storage: Awaited<ReturnType<StorageTarget['prepare']>>;
    let env: NodeJS.ProcessEnv;
    let harness: TestService;
    let toolCalls: Array<RuntimeEvents['tool:call']>;

    async function start(): Promise<void> {
      harness = await startTestService({ llm, env });
      harness.service.events.on('tool:call', (event) => toolCalls.push(event));
    }

    before(async () => {
      folder = mkdtempSync(join(tmpdir(), 'svc-pending-approvals-'));
      llm = await startFakeLlm();
      storage = await target.prepare();
      const servers = `${EVERYTHING_STDIO_YAML}    require_approval: [get-sum]\n`;
      env = { ...storage.env, API_KEYS: KEY, CONFIG_FILE: mcpDeploymentFile(folder, servers) };
      toolCalls = [];
      await start();
    });
    after(async () => {
      await harness?.close();
      await storage?.cleanup();
      await llm?.close();
      rmSync(folder, { recursive: true, force: true });
    });

    async function agent(sessionId: string): Promise<AgentResource> {
      const response = await fetch(`${harness.baseURL}/agents/${sessionId}`, { headers: { Authorization: `Bearer ${KEY}` } });
      expect(response.status).to.equal(200);
      return (await response.json()) as AgentResource;
    }

    async function inspected(sessionId: string): Promise<InspectedSession | undefined> {
      const response = await fetch(`${harness.service.url}/inspect/sessions`, { headers: { Authorization: `Bearer ${KEY}` } });
      return ((await response.json()) as { data: InspectedSession[] }).data.find((session) => session.id === sessionId);
    }

    async function askForSum(): Promise<string> {
      const { data, response } = await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: SUM_REQUEST }] }).withResponse();
      expect(data.choices[0]!.message.content).to.match(/^May I run the tool get-sum/);
      return response.headers.get('x-session-id')!;
    }

    it('shows the request in GET /v1/agents/{id} and /inspect, keeps it over a restart, and answers it after', async () => {
      const byWord = await askForSum();
      const byItem = await askForSum();
      const [request] = (await agent(byWord)).pending_approvals;
      expect(request!.id).to.match(/^mcpr_[0-9a-f]{32}$/);
      expect((await agent(byWord)).pending_approvals).to.deep.equal([
        { id: request!.id, type: 'mcp_approval_request', server_label: 'everything', name: 'get-sum', arguments: '{"a":2,"b":3}' },
      ]);
      expect((await inspected(byWord))?.pending_approvals).to.deep.equal([request]);
      const itemRequest = (await agent(byItem)).pending_approvals[0]!;

      await harness.close();
      await start();
      expect((await agent(byWord)).pending_approvals).to.deep.equal([request]);
      expect((await inspected(byItem))?.pending_approvals).to.deep.equal([itemRequest]);
      expect(toolCalls).to.deep.equal([]);

      // Answered by the user's word in chat completions, and by an item in the Responses API, after the restart.
      const answered = await harness.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: 'yes' }] }, { headers: { 'X-Session-ID': byWord } });
      expect(answered.choices[0]!.message.content).to.match(/^Tool result: .*\b5\b/);
      const response = await harness.client.responses.create({
        model: 'svc-agent',
        conversation: byItem,
        input: [{ type: 'mcp_approval_response', approval_request_id: itemRequest.id, approve: true }],
      });
      expect(response.output[0]).to.include({ type: 'mcp_call', approval_request_id: itemRequest.id, status: 'completed' });
      expect(toolCalls.map(({ sessionId }) => sessionId)).to.deep.equal([byWord, byItem]);
      expect((await agent(byWord)).pending_approvals).to.deep.equal([]);
      expect((await inspected(byItem))?.pending_approvals).to.deep.equal([]);
    });
  });
}
