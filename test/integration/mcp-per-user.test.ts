import { expect } from 'chai';
import { ServiceError } from '../../runtime/service-error.js';
import { answer, callTool, fakeTokenSource, testRegistry } from '../support/mcp-fixtures.js';
import { startHttpTestMcpServer, testServerStdioConfig, type HttpTestServer } from '../support/mcp-test-server.js';
import { isProcessAlive, waitFor } from '../support/wait-for.js';
import { rejection } from '../support/rejection.js';

type StdioWhoami = { token: string | null; accessToken: string | null; pid: number };


describe('McpRegistry with a per-user stdio server', () => {
  let tokens: ReturnType<typeof fakeTokenSource>;
  let registry: ReturnType<typeof testRegistry>;

  beforeEach(async () => {
    tokens = fakeTokenSource();
    registry = testRegistry({ servers: { personal: testServerStdioConfig({ per_user: true, require_approval: 'never', idempotent: false }) }, tokens, userProcessIdleMs: 60_000 });
    await registry.start();
  });

  afterEach(() => registry.close());

  it('lists the tools from a probe without a token when started', () => {
    expect(registry.status().personal).to.include({ status: 'per_user', users: 0, attempts: 1 });
    expect(registry.status().personal?.tools).to.be.greaterThan(0);
    expect(registry.definitions().map((tool) => (tool.type === 'function' ? tool.function.name : ''))).to.include('personal__whoami');
  });

  it("gives each user's process that user's token when two users call", async () => {
    tokens.tokens.set('alice', 'token-alice');
    tokens.tokens.set('bob', 'token-bob');

    const [alice, bob] = await Promise.all([
      callTool(registry, 'personal__whoami', {}, { userId: 'alice' }),
      callTool(registry, 'personal__whoami', {}, { userId: 'bob' }),
    ]);

    const aliceSees = answer<StdioWhoami>(alice);
    const bobSees = answer<StdioWhoami>(bob);
    expect(aliceSees).to.include({ token: 'token-alice', accessToken: 'token-alice' });
    expect(bobSees).to.include({ token: 'token-bob', accessToken: 'token-bob' });
    expect(bobSees.pid).to.not.equal(aliceSees.pid);
    expect(registry.status().personal?.users).to.equal(2);
  });

  it("reuses the user's process when the same user calls again", async () => {
    tokens.tokens.set('alice', 'token-alice');
    const first = answer<StdioWhoami>(await callTool(registry, 'personal__whoami', {}, { userId: 'alice' }));

    const second = answer<StdioWhoami>(await callTool(registry, 'personal__whoami', {}, { userId: 'alice' }));

    expect(second.pid).to.equal(first.pid);
  });

  it('throws TOOL_AUTH_REQUIRED with the login URL when the user has not connected an account', async () => {
    const error = await rejection(callTool(registry, 'personal__whoami', {}, { userId: 'carol' }));

    expect(error).to.be.instanceOf(ServiceError);
    const serviceError = error as ServiceError;
    expect(serviceError.code).to.equal('TOOL_AUTH_REQUIRED');
    expect(serviceError.status).to.equal(401);
    expect(serviceError.details).to.deep.equal({ server: 'personal', tool: 'whoami', login_url: 'http://svc.test/auth/idp/login?user_id=carol' });
    expect(serviceError.message).to.equal(
      'Tool whoami on server personal needs your identity provider account: connect it at http://svc.test/auth/idp/login?user_id=carol',
    );
    expect(registry.status().personal?.users).to.equal(0);
  });

  it("restarts the user's process with the new token when the token changes", async () => {
    tokens.tokens.set('alice', 'token-1');
    const before = answer<StdioWhoami>(await callTool(registry, 'personal__whoami', {}, { userId: 'alice' }));
    tokens.tokens.set('alice', 'token-2');

    const after = answer<StdioWhoami>(await callTool(registry, 'personal__whoami', {}, { userId: 'alice' }));

    expect(after.token).to.equal('token-2');
    expect(after.pid).to.not.equal(before.pid);
    await waitFor(() => !isProcessAlive(before.pid), 'the process with the old token to be gone');
    expect(registry.status().personal?.users).to.equal(1);
  });

  it("starts a fresh process for the user's next call when the user's process crashed", async () => {
    tokens.tokens.set('alice', 'token-alice');
    const before = answer<StdioWhoami>(await callTool(registry, 'personal__whoami', {}, { userId: 'alice' }));

    const crashed = await callTool(registry, 'personal__crash', {}, { userId: 'alice' });

    expect(crashed.isError).to.equal(true);
    expect(crashed.content).to.contain('closed the connection');
    const after = answer<StdioWhoami>(await callTool(registry, 'personal__whoami', {}, { userId: 'alice' }));
    expect(after).to.include({ token: 'token-alice' });
    expect(after.pid).to.not.equal(before.pid);
    expect(isProcessAlive(before.pid)).to.equal(false);
  });
});

describe('McpRegistry with a per-user server and no token source', () => {
  let registry: ReturnType<typeof testRegistry>;

  before(async () => {
    registry = testRegistry({ servers: { personal: testServerStdioConfig({ per_user: true, require_approval: 'never', idempotent: false }) } });
    await registry.start();
  });

  after(() => registry.close());

  it('throws TOOL_AUTH_REQUIRED when a per-user tool is called', async () => {
    const error = await rejection(callTool(registry, 'personal__whoami'));

    expect(error).to.be.instanceOf(ServiceError);
    expect((error as ServiceError).code).to.equal('TOOL_AUTH_REQUIRED');
    expect((error as ServiceError).details).to.deep.equal({ server: 'personal', tool: 'whoami', login_url: null });
  });
});

describe('McpRegistry idle per-user processes', () => {
  let registry: ReturnType<typeof testRegistry>;

  afterEach(() => registry.close());

  it("stops a user's process when it has been idle for the idle time", async () => {
    const tokens = fakeTokenSource();
    tokens.tokens.set('alice', 'token-alice');
    registry = testRegistry({ servers: { personal: testServerStdioConfig({ per_user: true, require_approval: 'never', idempotent: false }) }, tokens, userProcessIdleMs: 300 });
    await registry.start();
    const { pid } = answer<StdioWhoami>(await callTool(registry, 'personal__whoami', {}, { userId: 'alice' }));
    expect(registry.status().personal?.users).to.equal(1);
    const idleFrom = performance.now();

    await waitFor(() => registry.status().personal?.users === 0, 'the idle connection to be stopped');
    await waitFor(() => !isProcessAlive(pid), 'the idle process to be gone');

    expect(performance.now() - idleFrom).to.be.at.least(290);
  });
});

describe('McpRegistry with a per-user HTTP server', () => {
  let server: HttpTestServer;
  let tokens: ReturnType<typeof fakeTokenSource>;
  let registry: ReturnType<typeof testRegistry>;

  before(async () => {
    server = await startHttpTestMcpServer();
    tokens = fakeTokenSource();
    registry = testRegistry({
      servers: { remote: { transport: 'http', url: server.url, headers: { 'X-Static': 'yes' }, per_user: true, require_approval: 'never', idempotent: false } },
      tokens,
    });
    await registry.start();
  });

  after(async () => {
    await registry.close();
    await server.close();
  });

  it('lists the tools from a probe when started', () => {
    expect(registry.status().remote).to.include({ status: 'per_user', transport: 'http', users: 0 });
    expect(registry.definitions().map((tool) => (tool.type === 'function' ? tool.function.name : ''))).to.include('remote__whoami');
  });

  it("sends each user's own bearer token when two users call", async () => {
    tokens.tokens.set('alice', 'token-alice');
    tokens.tokens.set('bob', 'token-bob');

    const [alice, bob] = await Promise.all([
      callTool(registry, 'remote__whoami', {}, { userId: 'alice' }),
      callTool(registry, 'remote__whoami', {}, { userId: 'bob' }),
    ]);

    expect(answer(alice)).to.include({ authorization: 'Bearer token-alice' });
    expect(answer(bob)).to.include({ authorization: 'Bearer token-bob' });
    expect(registry.status().remote?.users).to.equal(2);
  });

  it('throws TOOL_AUTH_REQUIRED when the user has no token', async () => {
    const error = await rejection(callTool(registry, 'remote__whoami', {}, { userId: 'dave' }));

    expect((error as ServiceError).code).to.equal('TOOL_AUTH_REQUIRED');
    expect((error as ServiceError).details).to.include({ server: 'remote', tool: 'whoami' });
  });
});
