import { Pool, type Dispatcher } from 'undici';

/** Settings of the link to the LLM server. */
export type UpstreamSettings = { baseUrl: string; apiKey: string; maxConnections: number };

/**
 * The HTTP link to the LLM server: a keep-alive undici pool of `maxConnections` and the paths
 * the service uses. The OpenAI paths hang off the base URL (`…/v1/chat/completions`, `…/v1/models`);
 * the servers' own endpoints off its origin (`/props`, `/tokenize`, `/api/ps`).
 */
export class UpstreamHttp {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly headers: Record<string, string>;

  constructor(settings: UpstreamSettings) {
    const base = new URL(settings.baseUrl.replace(/\/+$/, '') + '/');
    this.pool = new Pool(base.origin, { connections: settings.maxConnections, keepAliveTimeout: 30_000 });
    this.basePath = base.pathname;
    this.headers = { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${settings.apiKey}` };
  }

  /** A path under the base URL (`chat/completions` gives `/v1/chat/completions`). */
  apiPath(path: string): string {
    return `${this.basePath}${path}`;
  }

  /** Sends a JSON body, with the caller's `traceparent` when tracing; the answer's body is the caller's to read. */
  post(path: string, body: string, signal: AbortSignal, traceparent?: string): Promise<Dispatcher.ResponseData> {
    const headers = traceparent === undefined ? this.headers : { ...this.headers, traceparent };
    return this.pool.request({ path, method: 'POST', headers, body, signal });
  }

  /** A GET's JSON body when it answers 200 within `timeoutMs`; undefined otherwise (no such endpoint, no answer). */
  async getJson(path: string, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    return this.json(path, { method: 'GET' }, timeoutMs, signal);
  }

  /** A POST's JSON body when it answers 200 within `timeoutMs`; undefined otherwise. */
  async postJson(path: string, body: unknown, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    return this.json(path, { method: 'POST', body: JSON.stringify(body) }, timeoutMs, signal);
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async json(path: string, request: { method: 'GET' | 'POST'; body?: string }, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const response = await this.pool.request({ path, ...request, headers: this.headers, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
      if (response.statusCode !== 200) {
        await response.body.dump();
        return undefined;
      }
      return await response.body.json();
    } catch {
      return undefined;
    }
  }
}
