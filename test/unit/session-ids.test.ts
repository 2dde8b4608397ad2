import { expect } from 'chai';
import { newSessionId } from '../../runtime/sessions/session-ids.js';

/** A version 7 UUID: 48 bits of time, version 7, 12 random bits, the variant (8–b), 62 random bits. */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('new session ids', () => {
  it('are version 7 UUIDs beginning with the millisecond they were made in', () => {
    const before = Date.now();
    const id = newSessionId();
    const after = Date.now();
    expect(id).to.match(UUID_V7);
    expect(Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).to.be.within(before, after);
  });

  it('are distinct, and sort after the ids made in an earlier millisecond', () => {
    const first = newSessionId();
    const start = Date.now();
    while (Date.now() === start) {
      // The next millisecond: ids of the same one are ordered by their random bits only.
    }
    const later = Array.from({ length: 1_000 }, () => newSessionId());
    expect(new Set([first, ...later]).size).to.equal(1_001);
    for (const id of later) expect(id > first, `${id} after ${first}`).to.equal(true);
  });
});
