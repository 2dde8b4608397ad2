import OpenAI from 'openai';
import type { FakeLlm } from '../../scripts/fake-llm-server.js';
import { expectSchema } from './openai-schema.js';

/** The roles and contents the LLM received in its last chat request. */
export function lastContext(llm: FakeLlm): Array<{ role: string; content: string }> {
  const request = [...llm.requests].reverse().find((candidate) => candidate.kind === 'chat')!;
  return request.body.messages!.map((message) => ({ role: message.role, content: String(message.content) }));
}

/** What an OpenAI client sees of a refused request: its status and the error's fields, checked against OpenAI's error schema. */
export async function refusal(
  call: Promise<unknown>,
): Promise<{ status: number | undefined; type: string | undefined; param: string | null | undefined; message: string | undefined }> {
  try {
    await call;
  } catch (error) {
    if (!(error instanceof OpenAI.APIError)) throw error;
    // The client keeps the body's `error` object.
    expectSchema('ErrorResponse', { error: error.error });
    const body = error.error as { type?: string; param?: string | null; message?: string } | undefined;
    return { status: error.status, type: body?.type, param: body?.param, message: body?.message };
  }
  throw new Error('the request was not refused');
}
