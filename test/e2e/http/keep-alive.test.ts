import { once } from 'node:events';
import { Agent, get, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import winston from 'winston';
import { loadConfig } from '../../../config/load-config.js';
import { startService } from '../../../gateway/server/service.js';
import { startFakeLlm } from '../../../scripts/fake-llm-server.js';
import { startTestService, testLogger, type TestService } from '../../support/service-harness.js';

/** A GET through `agent`: the status, and whether it went over a connection the agent kept from an earlier request. */
function getThrough(agent: Agent, url: string): Promise<{ status: number; reusedSocket: boolean; localPort: number }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { agent }, (response: IncomingMessage) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode!, reusedSocket: request.reusedSocket, localPort: request.socket!.localPort! }));
    });
    request.on('error', reject);
  });
}

describe('kept-alive connections', function () {
  this.timeout(60_000);

  describe('with the default settings', () => {
    let harness: TestService;
    before(async () => {
      harness = await startTestService();
    });
    after(async () => harness?.close());

    it('keeps an idle connection open 65 s, and waits 66 s for a request\'s headers', () => {
      expect(harness.service.server.keepAliveTimeout).to.equal(65_000);
      expect(harness.service.server.headersTimeout).to.equal(66_000);
    });

    it('answers a client that reuses its connection after 6 s idle, longer than Node\'s 5 s default', async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const first = await getThrough(agent, `${harness.baseURL}/models`);
        expect(first.status).to.equal(200);
        // The idle time is what is tested: no event to wait for instead.
        await new Promise((resolve) => setTimeout(resolve, 6_000));
        const second = await getThrough(agent, `${harness.baseURL}/models`);
        expect(second).to.deep.equal({ status: 200, reusedSocket: true, localPort: first.localPort });
      } finally {
        agent.destroy();
      }
    });
  });

  describe('with app.keep_alive_timeout_ms and app.headers_timeout_ms', () => {
    it('sets the server\'s time-outs to the configured ones', async () => {
      const harness = await startTestService({ env: { APP_KEEP_ALIVE_TIMEOUT_MS: '75000', APP_HEADERS_TIMEOUT_MS: '76000' } });
      try {
        expect(harness.service.server.keepAliveTimeout).to.equal(75_000);
        expect(harness.service.server.headersTimeout).to.equal(76_000);
      } finally {
        await harness.close();
      }
    });

    it('refuses to start when the headers time-out does not exceed the keep-alive time-out', async () => {
      const config = loadConfig({ APP_HOST: '127.0.0.1', APP_PORT: '0', DATA_DIR: 'memory://', APP_KEEP_ALIVE_TIMEOUT_MS: '70000', APP_HEADERS_TIMEOUT_MS: '70000' });
      const error = await startService(config, testLogger()).then(
        (service) => service.close().then(() => undefined),
        (failure: Error) => failure,
      );
      expect(error?.name).to.equal('ConfigError');
      expect(error?.message).to.match(/app\.headers_timeout_ms/);
    });
  });

  describe('at shutdown', () => {
    it('closes at once a connection no request came on, as it does an idle one, instead of cutting it at the shutdown time-out', async () => {
      const llm = await startFakeLlm();
      const messages: string[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          messages.push(chunk.toString());
          done();
        },
      });
      const logger = winston.createLogger({ level: 'warn', transports: [new winston.transports.Stream({ stream: sink })] });
      const config = loadConfig({ APP_HOST: '127.0.0.1', APP_PORT: '0', DATA_DIR: 'memory://', LLM_BASE_URL: llm.url, APP_SHUTDOWN_TIMEOUT_MS: '2000' });
      const service = await startService(config, logger);
      try {
        // A client (a browser, a proxy's pool) may open a connection and send nothing yet: Node counts it neither idle nor done.
        const unused = connect(service.port, '127.0.0.1');
        await once(unused, 'connect');
        const closed = once(unused, 'close');
        await service.close();
        await closed;
        expect(messages.join('')).not.to.match(/were cut/);
      } finally {
        await service.close();
        await llm.close();
      }
    });
  });
});
