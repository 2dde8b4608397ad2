import { expect } from 'chai';
import { approvalWordOf, normaliseWord, type ApprovalWords } from '../../runtime/tools/approval-words.js';

const WORDS: ApprovalWords = { approve: ['yes', 'y', 'approve', 'approved', 'ok'], deny: ['no', 'n', 'deny', 'denied'] };

describe('the approval word rule', () => {
  it('approves with each approving word, whatever its case, surrounding space or trailing punctuation', () => {
    for (const text of ['yes', 'Y', ' Approve ', 'approved.', 'OK!', 'yes!!!', 'Yes?', '\tok…\n']) {
      expect(approvalWordOf(text, WORDS), text).to.equal('approve');
    }
  });

  it('reads each plain denial word as a denial, with the same leniency', () => {
    for (const text of ['no', 'N', 'Deny.', ' denied! ', 'NO...']) {
      expect(approvalWordOf(text, WORDS), text).to.equal('deny');
    }
  });

  it('reads anything else as something else: more words, leading punctuation, a word inside a sentence', () => {
    for (const text of ['yes please', 'no, use the other one', '¿yes', 'okay', 'yess', '', '!!!', 'I said yes']) {
      expect(approvalWordOf(text, WORDS), text).to.equal('other');
    }
  });

  it('uses the configured words only', () => {
    const words: ApprovalWords = { approve: ['ja', 'go ahead'], deny: ['nein'] };
    expect(approvalWordOf('Go ahead!', words)).to.equal('approve');
    expect(approvalWordOf('nein.', words)).to.equal('deny');
    expect(approvalWordOf('yes', words)).to.equal('other');
  });

  it('normalises a word as it compares a message', () => {
    expect(normaliseWord('  OK. ')).to.equal('ok');
    expect(normaliseWord('Go Ahead!?')).to.equal('go ahead');
    expect(normaliseWord('?!')).to.equal('');
  });
});
