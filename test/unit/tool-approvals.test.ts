import { expect } from 'chai';
import { ServiceError } from '../../runtime/service-error.js';
import type { ApprovalWords } from '../../runtime/tools/approval-words.js';
import {
  approvalQuestion,
  checkApprovalAnswers,
  decideApprovals,
  denialResult,
  newApprovalRequestId,
  type ApprovalAnswer,
  type ApprovalRequest,
} from '../../runtime/tools/tool-approvals.js';

const WORDS: ApprovalWords = { approve: ['yes', 'y', 'approve', 'approved', 'ok'], deny: ['no', 'n', 'deny', 'denied'] };

function request(id: string, tool: string, args: string): ApprovalRequest {
  return { id, server: 'everything', tool, call: { id: `call_${id}`, type: 'function', function: { name: `everything__${tool}`, arguments: args } } };
}

const sum = request('mcpr_sum', 'get-sum', '{"a":2,"b":3}');
const echo = request('mcpr_echo', 'echo', '{"message":"hi"}');

function answer(requestId: string, approve: boolean, index = 0, reason?: string): ApprovalAnswer {
  return { requestId, approve, param: `input[${index}].approval_request_id`, ...(reason ? { reason } : {}) };
}

function refusal(check: () => void): ServiceError {
  try {
    check();
  } catch (error) {
    expect(error).to.be.instanceOf(ServiceError);
    return error as ServiceError;
  }
  throw new Error('expected a ServiceError');
}

describe('tool approvals', () => {
  describe('decideApprovals', () => {
    it('approves every pending request when the message is an approving word, and nothing goes on', () => {
      expect(decideApprovals([sum, echo], [], 'Yes.', WORDS)).to.deep.equal({
        decisions: [
          { request: sum, approve: true },
          { request: echo, approve: true },
        ],
        goesOn: false,
      });
    });

    it('refuses them all when the message is a plain denial word, and nothing goes on', () => {
      expect(decideApprovals([sum], [], 'NO', WORDS)).to.deep.equal({ decisions: [{ request: sum, approve: false }], goesOn: false });
    });

    it('refuses them all when the message says something else, and the message goes on', () => {
      expect(decideApprovals([sum], [], 'yes, but with 4 and 5', WORDS)).to.deep.equal({ decisions: [{ request: sum, approve: false }], goesOn: true });
    });

    it('decides by explicit answers when there are some, refusing the requests they leave out, whatever the message says', () => {
      expect(decideApprovals([sum, echo], [answer('mcpr_echo', true)], 'no', WORDS)).to.deep.equal({
        decisions: [
          { request: sum, approve: false },
          { request: echo, approve: true },
        ],
        goesOn: true,
      });
      expect(decideApprovals([sum], [answer('mcpr_sum', false, 0, 'too costly')], '', WORDS).decisions).to.deep.equal([
        { request: sum, approve: false, reason: 'too costly' },
      ]);
    });
  });

  describe('checkApprovalAnswers', () => {
    it('accepts answers to pending requests', () => {
      expect(() => checkApprovalAnswers([sum, echo], [answer('mcpr_echo', true), answer('mcpr_sum', false, 1)])).not.to.throw();
    });

    it('refuses an answer to a request that is not pending with a 400 naming its param', () => {
      const error = refusal(() => checkApprovalAnswers([sum], [answer('mcpr_sum', true), answer('mcpr_elsewhere', true, 1)]));
      expect(error).to.include({ status: 400, code: 'INVALID_REQUEST', param: 'input[1].approval_request_id' });
      expect(error.message).to.include("'mcpr_elsewhere' is not pending");
    });

    it('refuses a second answer to the same request', () => {
      const error = refusal(() => checkApprovalAnswers([sum], [answer('mcpr_sum', true), answer('mcpr_sum', false, 2)]));
      expect(error).to.include({ status: 400, param: 'input[2].approval_request_id' });
      expect(error.message).to.include('answered twice');
    });
  });

  describe('approvalQuestion', () => {
    it('names the tool, its server and its arguments, and the first approving and denial words', () => {
      expect(approvalQuestion([sum], WORDS)).to.equal('May I run the tool get-sum of the server everything with the arguments {"a":2,"b":3}? Reply yes to run it, or no.');
      expect(approvalQuestion([sum], { approve: ['ja'], deny: ['nein'] })).to.match(/Reply ja to run it, or nein\.$/);
    });

    it('lists several calls, one a line, and shows absent arguments as {}', () => {
      expect(approvalQuestion([sum, request('mcpr_time', 'get-time', '')], WORDS)).to.equal(
        [
          'May I run these tools?',
          '1. get-sum of the server everything with the arguments {"a":2,"b":3}',
          '2. get-time of the server everything with the arguments {}',
          'Reply yes to run them all, or no.',
        ].join('\n'),
      );
    });
  });

  it('tells the LLM a refused call did not run, with the reason when one was given', () => {
    expect(denialResult({ request: sum, approve: false })).to.deep.equal({
      toolCallId: 'call_mcpr_sum',
      name: 'everything__get-sum',
      content: 'Error: the user did not approve this call of get-sum (server everything), so it did not run.',
      isError: true,
      source: { server: 'everything', tool: 'get-sum' },
    });
    expect(denialResult({ request: sum, approve: false, reason: 'not today' }).content).to.match(/did not run\. Their reason: not today$/);
  });

  it('makes request ids of mcpr_ and 32 hexadecimal characters, a new one each time', () => {
    const [first, second] = [newApprovalRequestId(), newApprovalRequestId()];
    expect(first).to.match(/^mcpr_[0-9a-f]{32}$/);
    expect(second).not.to.equal(first);
  });
});
