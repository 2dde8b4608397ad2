/** What the health check says of the LLM server. */
export type LlmServerStatus = 'running' | 'error' | 'not_running';

/**
 * Asks the LLM server for `<baseUrl>/models` with a time-out: 200 is `running`, any other
 * status `error`, no answer in time (or none at all) `not_running`.
 */
export async function checkLlmServer(baseUrl: string, timeoutMs: number, apiKey?: string): Promise<LlmServerStatus> {
  try {
    const response = await fetch(`${baseUrl.replace(/\/+$/, '')}/models`, {
      signal: AbortSignal.timeout(timeoutMs),
      headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
    });
    await response.body?.cancel();
    return response.status === 200 ? 'running' : 'error';
  } catch {
    return 'not_running';
  }
}
