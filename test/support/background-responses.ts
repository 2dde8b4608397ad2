import { randomUUID } from 'node:crypto';
import { bodyTextOf } from '../../gateway/responses/responses-format.js';
import type { NewResponseRecord } from '../../runtime/ports.js';

/** The body of `queuedResponse`. */
export const QUEUED_BODY = { object: 'response', status: 'queued', background: true, output: [] };

/** A background response of alice as it is stored when it starts: `queued`, in a session of its own. */
export function queuedResponse(): NewResponseRecord {
  return {
    id: `resp_${randomUUID().replaceAll('-', '')}`,
    userId: 'alice',
    sessionId: `s-${randomUUID()}`,
    previousResponseId: null,
    historyHash: '',
    body: bodyTextOf(QUEUED_BODY),
    input: [{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
  };
}
