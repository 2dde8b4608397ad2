import { expect } from 'chai';
import { newItemId } from '../../gateway/responses/responses-format.js';

/** An id's characters after its prefix: 12 of time, then 36 random ones. */
const digitsOf = (id: string) => id.slice(id.indexOf('_') + 1);

describe('the ids of the Responses API', () => {
  it('are the prefix and 48 hexadecimal characters, all distinct across many draws of random bytes', () => {
    const ids = Array.from({ length: 1_000 }, (_, index) => newItemId(index % 2 === 0 ? 'resp' : 'msg'));
    for (const [index, id] of ids.entries()) expect(id).to.match(index % 2 === 0 ? /^resp_[0-9a-f]{48}$/ : /^msg_[0-9a-f]{48}$/);
    expect(new Set(ids.map(digitsOf)).size).to.equal(ids.length);
  });

  it('begin with the millisecond they were made in, in 12 hexadecimal characters', () => {
    const before = Date.now();
    const id = newItemId('resp');
    const after = Date.now();
    const time = Number.parseInt(digitsOf(id).slice(0, 12), 16);
    expect(time).to.be.within(before, after);
  });

  it('sort after the ids made in an earlier millisecond, so new keys go to the end of an index', () => {
    const first = newItemId('resp');
    const start = Date.now();
    while (Date.now() === start) {
      // The next millisecond: ids of the same one are ordered by their random part only.
    }
    const later = Array.from({ length: 200 }, () => newItemId('resp'));
    for (const id of later) expect(id > first, `${id} after ${first}`).to.equal(true);
  });

  it('use every hexadecimal digit in every random position, as random bytes do', () => {
    const ids = Array.from({ length: 2_000 }, () => digitsOf(newItemId('fc')));
    for (let position = 12; position < 48; position += 1) {
      expect(new Set(ids.map((id) => id[position])).size, `position ${position}`).to.equal(16);
    }
  });
});
