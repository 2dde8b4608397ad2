import { expect } from 'chai';
import { newItemId } from '../../gateway/responses-format.js';

describe('the ids of the Responses API', () => {
  it('are the prefix and 48 hexadecimal characters, all distinct across many draws of random bytes', () => {
    const ids = Array.from({ length: 1_000 }, (_, index) => newItemId(index % 2 === 0 ? 'resp' : 'msg'));
    for (const [index, id] of ids.entries()) expect(id).to.match(index % 2 === 0 ? /^resp_[0-9a-f]{48}$/ : /^msg_[0-9a-f]{48}$/);
    const randomParts = ids.map((id) => id.slice(id.indexOf('_') + 1));
    expect(new Set(randomParts).size).to.equal(ids.length);
  });

  it('use every hexadecimal digit in every position, as random bytes do', () => {
    const ids = Array.from({ length: 2_000 }, () => newItemId('fc').slice('fc_'.length));
    for (let position = 0; position < 48; position += 1) {
      expect(new Set(ids.map((id) => id[position])).size, `position ${position}`).to.equal(16);
    }
  });
});
