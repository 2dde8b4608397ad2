import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import OpenAI from 'openai';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { useEverythingService } from '../../support/everything-service.js';
import { EVERYTHING_STDIO_YAML, mcpDeploymentFile } from '../../support/mcp-fixtures.js';
import { startOtlpReceiver } from '../../support/otlp-receiver.js';
import { startTestService, type TestService } from '../../support/service-harness.js';

const CHROMIUM = '/usr/bin/chromium';
const OUTPUT_DIR = fileURLToPath(new URL('../../../test-output/', import.meta.url));
const SESSION = 'inspected-in-browser';
const KEY = 'inspect-page-key';

/** What the scripted LLM received in a chat request. */
type SentChat = { model: string; messages: Array<{ role: string; content?: unknown }>; tools?: Array<{ function: { name: string } }> };

/** The state the drawing marks as current. */
function currentState(page: Page): Promise<string | null> {
  return page.locator('#graph .state.current').getAttribute('data-state');
}

async function expectCurrentState(page: Page, state: string): Promise<void> {
  await page.locator(`#graph .state.current[data-state="${state}"]`).waitFor();
  expect(await currentState(page)).to.equal(state);
}

/** Whether a `<details>` element is open. */
async function isOpen(details: Locator): Promise<boolean> {
  return (await details.getAttribute('open')) !== null;
}

/** What the function `backgroundOf` runs in the page uses there (the tests compile without the DOM's types). */
type PageGlobals = { getComputedStyle(element: unknown): { backgroundColor: string } };

/** The background colour the browser computed for an element. */
function backgroundOf(element: Locator): Promise<string> {
  return element.evaluate((node) => (globalThis as unknown as PageGlobals).getComputedStyle(node).backgroundColor);
}

const hasChromium = existsSync(CHROMIUM);
// Without a browser there is nothing to drive; .ci/run installs Debian's chromium.
const describeInBrowser = hasChromium ? describe : describe.skip;

describeInBrowser(`inspector page (/inspect) in a browser${hasChromium ? '' : ` (skipped: ${CHROMIUM} is absent)`}`, function () {
  // A browser start and several turns on a loaded machine.
  this.timeout(120_000);
  let harness: TestService;
  let browser: Browser;
  let client: OpenAI;

  before(async () => {
    harness = await startTestService({ env: { API_KEYS: KEY } });
    client = new OpenAI({ baseURL: harness.baseURL, apiKey: KEY, maxRetries: 0, defaultHeaders: { 'X-Session-ID': SESSION } });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  after(async () => {
    await browser?.close();
    await harness?.close();
  });

  it('asks for the key, then shows the session, its state, transitions and messages as they happen', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const outside: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(harness.service.url)) outside.push(request.url());
    });
    await page.goto(`${harness.service.url}/inspect`);

    await page.locator('#key-input').fill(KEY);
    await page.locator('#key-form button').click();
    await page.locator('#connection[data-status="live"]').waitFor();

    // A turn slower than the page's reload of the session list: the list it read mid-turn
    // must not leave the drawing on the state the session has left.
    expect((await client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'hello inspector [[slow:800]]' }] })).choices[0]!.message.content).to.equal(
      'Echo: hello inspector [[slow:800]]',
    );
    const row = page.locator(`#sessions tr[data-session-id="${SESSION}"]`);
    await row.waitFor();
    await row.click();
    await expectCurrentState(page, 'ask_user');
    await page.locator('#transitions tbody tr[data-from="agent_reply"][data-to="ask_user"]').waitFor();
    await page.locator('#messages .role-assistant', { hasText: 'Echo: hello inspector' }).waitFor();

    // A turn the LLM never answers holds the session in its agent state until the client leaves.
    const hanging = new AbortController();
    const held = client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'wait [[hang]]' }] }, { signal: hanging.signal }).catch(() => null);
    await harness.llm.waitForRequest((request) => JSON.stringify(request.body.messages ?? []).includes('[[hang]]'));
    await expectCurrentState(page, 'agent_reply');
    await page.locator('#transitions tbody tr[data-from="ask_user"][data-to="agent_reply"]').waitFor();
    hanging.abort();
    await held;
    await expectCurrentState(page, 'ask_user');
    // The call the client left is shown cancelled, in its own turn.
    await page.locator('#calls .turn .call.outcome-cancelled .call-outcome', { hasText: 'cancelled' }).waitFor();

    await client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'second question' }] });
    await page.locator('#messages .role-user', { hasText: 'second question' }).waitFor();
    await page.locator('#messages .role-assistant', { hasText: 'Echo: second question' }).waitFor();
    expect(await page.locator('#transitions tbody tr').count()).to.be.at.least(5);
    // The list is read again every 200 ms: its row shows the state once a read after the turn came back.
    await row.locator('td').nth(3).filter({ hasText: /^ask_user$/ }).waitFor();
    expect(await row.locator('td').nth(3).textContent()).to.equal('ask_user');

    await mkdir(OUTPUT_DIR, { recursive: true });
    const screenshot = `${OUTPUT_DIR}inspect-page.png`;
    await page.screenshot({ path: screenshot, fullPage: true });
    expect((await stat(screenshot)).size).to.be.greaterThan(0);
    expect(outside, 'requests to other origins').to.deep.equal([]);
  });

  it('keeps the key for the tab: a reload asks nothing', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${harness.service.url}/inspect`);
    await page.locator('#key-input').fill(KEY);
    await page.locator('#key-form button').click();
    await page.locator(`#sessions tr[data-session-id="${SESSION}"]`).waitFor();
    await page.reload();
    await page.locator(`#sessions tr[data-session-id="${SESSION}"]`).waitFor();
    expect(await page.locator('#key-form').isHidden()).to.equal(true);
    await context.close();
  });

  it('asks nothing in local mode (no API_KEYS) and shows the history there too', async () => {
    const local = await startTestService();
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${local.service.url}/inspect`);
      await page.locator('#connection[data-status="live"]').waitFor();
      expect(await page.locator('#key-form').isHidden()).to.equal(true);
      await local.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'local' }] }, { headers: { 'X-Session-ID': 'local-session' } });
      await page.locator('#sessions tr[data-session-id="local-session"]').click();
      await expectCurrentState(page, 'ask_user');
      await page.locator('#transitions tbody tr[data-from="agent_reply"][data-to="ask_user"]').waitFor();
      await page.locator('#messages .role-user', { hasText: 'local' }).waitFor();
      await page.locator('#messages .role-assistant', { hasText: 'Echo: local' }).waitFor();
      expect(await page.locator('#history-note').isHidden()).to.equal(true);
    } finally {
      await context.close();
      await local.close();
    }
  });

  it("links a call to its trace in the tracing UI inspect.trace_url names, when tracing is on", async () => {
    const receiver = await startOtlpReceiver();
    const traced = await startTestService({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, INSPECT_TRACE_URL: 'http://jaeger.example:16686/trace/{trace_id}' } });
    const context = await browser.newContext();
    try {
      await traced.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content: 'traced' }] }, { headers: { 'X-Session-ID': 'traced-session' } });
      const calls = (await (await fetch(`${traced.service.url}/inspect/sessions/traced-session/calls`)).json()) as { data: Array<{ trace_id: string | null }> };
      const traceId = calls.data[0]!.trace_id;
      expect(traceId).to.match(/^[0-9a-f]{32}$/);
      const page = await context.newPage();
      await page.goto(`${traced.service.url}/inspect`);
      await page.locator('#sessions tr[data-session-id="traced-session"]').click();
      const call = page.locator('#calls .call').first();
      await call.locator('summary').click();
      const link = call.locator('a.call-trace');
      await link.waitFor();
      expect(await link.getAttribute('href')).to.equal(`http://jaeger.example:16686/trace/${traceId}`);
      expect(await link.textContent()).to.include(traceId);
    } finally {
      await context.close();
      await traced.close();
      await receiver.close();
    }
  });

  it("lists each session with its first message, opens the session an address names (?session=ID), and names the chosen one in the address", async () => {
    const local = await startTestService();
    const context = await browser.newContext();
    try {
      for (const [session, text] of [['linked-a', 'first words of a'], ['linked-b', 'first words of b']]) {
        await local.client.chat.completions.create({ model: 'svc-agent', messages: [{ role: 'user', content: text! }] }, { headers: { 'X-Session-ID': session! } });
      }
      const page = await context.newPage();
      await page.goto(`${local.service.url}/inspect?session=linked-b`);
      await page.locator('#messages .role-user', { hasText: 'first words of b' }).waitFor();
      expect(await page.locator('#session-title').textContent()).to.equal('Session linked-b');
      expect(await page.locator('#sessions tr[data-session-id="linked-a"] .first-message').textContent()).to.equal('first words of a');
      await page.locator('#sessions tr[data-session-id="linked-a"]').click();
      await page.locator('#messages .role-user', { hasText: 'first words of a' }).waitFor();
      expect(new URL(page.url()).searchParams.get('session')).to.equal('linked-a');
    } finally {
      await context.close();
      await local.close();
    }
  });

  it('shows the tool calls a session waits to have approved, until they are answered', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'svc-inspect-approvals-'));
    const servers = `${EVERYTHING_STDIO_YAML}    require_approval: [get-sum]\n`;
    const local = await startTestService({ env: { CONFIG_FILE: mcpDeploymentFile(folder, servers) } });
    const context = await browser.newContext();
    const chat = (content: string) =>
      local.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content }] }, { headers: { 'X-Session-ID': 'waiting-session' } });
    try {
      await chat('Add them up [[tool:everything__get-sum {"a":2,"b":3}]]');
      const page = await context.newPage();
      await page.goto(`${local.service.url}/inspect`);
      const row = page.locator('#sessions tr[data-session-id="waiting-session"]');
      await row.click();
      await page.locator('#approvals li', { hasText: 'everything · get-sum({"a":2,"b":3})' }).waitFor();
      expect(await page.locator('#approvals .request-id').textContent()).to.match(/^mcpr_[0-9a-f]{32}$/);
      expect(await row.locator('td').nth(6).textContent()).to.equal('1 waiting');

      await chat('no');
      await page.locator('#approvals').waitFor({ state: 'hidden' });
      expect(await row.locator('td').nth(6).textContent()).to.equal('');
    } finally {
      await context.close();
      await local.close();
      rmSync(folder, { recursive: true, force: true });
    }
  });

  describe('the calls timeline', () => {
    const everything = useEverythingService();

    it('groups a session\'s calls by turn, opens a call to what it was sent, and marks a failed call and the error edge it took', async () => {
      const { harness: local } = everything;
      const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
      const chat = (content: string) =>
        local.client.chat.completions.create({ model: 'svc-default', messages: [{ role: 'user', content }] }, { headers: { 'X-Session-ID': 'timeline-session' } });
      try {
        await chat('say it back [[tool:everything__echo {"message":"hi there"}]]');
        const sent = local.llm.requests.filter((request) => request.kind === 'chat').map((request) => request.body as SentChat);
        expect(sent).to.have.length(2);

        const page = await context.newPage();
        await page.goto(`${local.service.url}/inspect`);
        await page.locator('#connection[data-status="live"]').waitFor();
        await page.locator('#sessions tr[data-session-id="timeline-session"]').click();
        const turns = page.locator('#calls > li.turn');
        await turns.nth(0).locator('.turn-count', { hasText: '3 calls' }).waitFor();
        const rows = turns.nth(0).locator('.call');
        const shown = await Promise.all(
          (await rows.all()).map(async (row) => `${await row.getAttribute('data-type')}:${await row.locator('.call-name').textContent()}:${await row.locator('.call-outcome').textContent()}`),
        );
        expect(shown).to.deep.equal([`llm:${sent[0]!.model}:ok`, 'tool:everything__echo:ok', `llm:${sent[1]!.model}:ok`]);
        expect(await rows.nth(0).locator('.call-tokens').textContent()).to.match(/^\d+ prompt \+ \d+ completion tokens$/);

        // Opened, the first LLM call shows exactly what the LLM server received.
        await rows.nth(0).locator('summary').click();
        const system = rows.nth(0).locator('.context-message.role-system .content');
        await system.waitFor();
        expect(sent[0]!.messages[0]!.role).to.equal('system');
        expect(await system.textContent()).to.equal(sent[0]!.messages[0]!.content);
        expect(await rows.nth(0).locator('.call-tools .tool-name').allTextContents()).to.deep.equal(sent[0]!.tools!.map((tool) => tool.function.name));
        await rows.nth(1).locator('summary').click();
        expect(await rows.nth(1).locator('.call-result').textContent()).to.equal('Echo: hi there');
        expect(JSON.parse((await rows.nth(1).locator('.call-arguments').textContent())!)).to.deep.equal({ message: 'hi there' });

        // A failed LLM call arrives live: its row shows the outcome and the error without being opened.
        expect(await page.locator('#graph .transition.taken-error').count()).to.equal(0);
        await chat('break [[error:503 the model is overloaded]]');
        const failed = turns.nth(1).locator('.call.outcome-error');
        await failed.waitFor();
        expect(await isOpen(failed)).to.equal(false);
        expect(await failed.locator('.call-outcome').textContent()).to.equal('error');
        expect(await failed.locator('.call-error').isVisible()).to.equal(true);
        expect(await failed.locator('.call-error').textContent()).to.match(/503.*the model is overloaded/);
        expect(await backgroundOf(failed)).to.not.equal(await backgroundOf(rows.nth(0)));
        expect(await turns.nth(1).locator('.turn-failed').textContent()).to.equal('1 failed');
        // The drawing marks the way the failure took: agent_reply back to the user.
        await page.locator('#graph .transition.taken-error[data-from="agent_reply"][data-to="ask_user"]').waitFor();
        expect(await page.locator('#graph .transition.taken-error').count()).to.equal(1);
        // New calls leave the rows opened before as they were.
        expect(await isOpen(rows.nth(0))).to.equal(true);

        // A tool that fails is a failed row too, in a turn that goes on.
        await chat('try it [[tool:everything__no-such-tool {}]]');
        const failedTool = turns.nth(2).locator('.call[data-type="tool"].outcome-error');
        await failedTool.waitFor();
        expect(await failedTool.locator('.call-name').textContent()).to.equal('everything__no-such-tool');
        expect(await failedTool.locator('.call-error').textContent()).to.include('no-such-tool');
        await turns.nth(2).locator('.turn-count', { hasText: '3 calls' }).waitFor();

        await mkdir(OUTPUT_DIR, { recursive: true });
        await page.screenshot({ path: `${OUTPUT_DIR}inspect-calls.png`, fullPage: true });
      } finally {
        await context.close();
      }
    });
  });

  it('asks again for a wrong key, saying why', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${harness.service.url}/inspect`);
    await page.locator('#key-input').fill('not-the-key');
    await page.locator('#key-form button').click();
    await page.locator('#key-error', { hasText: 'Incorrect API key' }).waitFor();
    expect(await page.locator('#inspector').isHidden()).to.equal(true);
    await context.close();
  });
});
