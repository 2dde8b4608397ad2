import { SYSTEM_PROMPT, USER_MESSAGES } from './chat-body.js';

/** The body of request number `seq`, continuing the response `previousId` when there is one. */
export type ResponsesBody = (seq: number, previousId: string | undefined) => Buffer;

/**
 * Serialised Responses API bodies of the chat bench's turns: the same system prompt as
 * `instructions` (a client's system message and `instructions` both go after the agent's
 * prompt), only the new user message as `input`, rotated by request number. The part after
 * `previous_response_id` is serialised once, so a chained body costs one string concatenation.
 */
export function responsesBodies(stream: boolean): ResponsesBody {
  const tails = USER_MESSAGES.map((input) => JSON.stringify({ model: 'svc-agent', instructions: SYSTEM_PROMPT, input, stream }));
  const alone = tails.map((tail) => Buffer.from(tail));
  return (seq, previousId) => {
    const index = seq % tails.length;
    return previousId === undefined ? alone[index]! : Buffer.from(`{"previous_response_id":${JSON.stringify(previousId)},${tails[index]!.slice(1)}`);
  };
}
