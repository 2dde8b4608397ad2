import { expect } from 'chai';
import { findTextFault, isSessionId, paramOf, textFault } from '../../gateway/http/text-rules.js';

describe('text-rules', () => {
  describe('textFault', () => {
    it('names NUL and lone surrogates, and lets surrogate pairs through', () => {
      expect(textFault('a\u0000b')).to.match(/NUL/);
      expect(textFault('a\ud800b')).to.match(/surrogate/);
      expect(textFault('a\udfffb')).to.match(/surrogate/);
      expect(textFault('Grüße 😀 東京')).to.equal(null);
    });
  });

  describe('findTextFault', () => {
    it('finds a breach in a string or a key, with its path', () => {
      const body = { messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: [{ function: { arguments: '{"q":"\u0000"}' } }] }] };
      expect(paramOf(findTextFault(body)!.path)).to.equal('messages[1].tool_calls[0].function.arguments');
      expect(paramOf(findTextFault({ metadata: { 'k\ud800': 'v' } })!.path)).to.equal('metadata.k\ud800');
      expect(paramOf(findTextFault('\u0000')!.path)).to.equal('body');
      expect(findTextFault({ a: [1, true, null, 'ok'] })).to.equal(null);
    });

    it('walks a body nested far deeper than the stack in linear time when the breach is at the bottom', () => {
      const depth = 200_000;
      const body = JSON.parse(`${'['.repeat(depth)}"\\u0000"${']'.repeat(depth)}`) as unknown;
      const started = performance.now();
      const found = findTextFault(body);
      expect(found!.path).to.have.length(depth);
      expect(performance.now() - started).to.be.below(2_000);
    });
  });

  describe('isSessionId', () => {
    it('takes 1 to 255 printable ASCII characters without a space at either end', () => {
      for (const good of ['a', 'my-session_1.A~', 'two words', 'x'.repeat(255)]) expect(isSessionId(good), good).to.equal(true);
      for (const bad of ['', 'café', 'a\tb', ' lead', 'trail ', 'x'.repeat(256), 'a\u0000b']) expect(isSessionId(bad), JSON.stringify(bad)).to.equal(false);
    });
  });
});
