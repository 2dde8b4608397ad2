import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FakeLlm } from '../../scripts/fake-llm-server.js';

/** The scripted LLM behind a proxy that holds `/v1/embeddings` requests until the test opens its gate. */
export type GatedEmbeddings = {
  /** The LLM base URL to give the service (with `/v1`). */
  url: string;
  /** Resolves when the first embeddings request is held. */
  held: Promise<void>;
  /** Sends the held embeddings requests on, and every later one at once. */
  open(): void;
  close(): Promise<void>;
};

/** Starts a proxy in front of `llm` whose embeddings requests wait for `open()`: an LLM server slow to embed. */
export async function startGatedEmbeddings(llm: FakeLlm): Promise<GatedEmbeddings> {
  let isOpen = false;
  const waiting: Array<() => void> = [];
  let onHeld!: () => void;
  const held = new Promise<void>((resolve) => (onHeld = resolve));
  const server = createServer((req, res) => {
    const forward = () => {
      const upstream = request({ host: '127.0.0.1', port: llm.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      req.pipe(upstream);
    };
    if (isOpen || req.method !== 'POST' || req.url !== '/v1/embeddings') return forward();
    waiting.push(forward);
    onHeld();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    held,
    open() {
      isOpen = true;
      for (const forward of waiting.splice(0)) forward();
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
