import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createLoginLinkSigner } from '../../runtime/accounts/login-links.js';

describe('createLoginLinkSigner', () => {
  const secret = randomBytes(32);
  const now = Date.UTC(2026, 10, 23, 12, 0, 0);
  const signer = createLoginLinkSigner(secret, 600_000);

  it('verifies its own link for the user it was made for, until it expires', () => {
    const { expires, sig } = signer.sign('alice', now);
    expect(expires).to.equal((now + 600_000) / 1000);
    expect(signer.verify('alice', expires, sig, now)).to.equal(true);
    expect(signer.verify('alice', expires, sig, expires * 1000 - 1)).to.equal(true);
    expect(signer.verify('alice', expires, sig, expires * 1000)).to.equal(false);
  });

  it('refuses the link for another user, another expiry, another key, or a mangled signature', () => {
    const { expires, sig } = signer.sign('alice', now);
    expect(signer.verify('bob', expires, sig, now)).to.equal(false);
    expect(signer.verify('alice', expires + 60, sig, now)).to.equal(false);
    expect(createLoginLinkSigner(randomBytes(32), 600_000).verify('alice', expires, sig, now)).to.equal(false);
    expect(signer.verify('alice', expires, sig.slice(0, -2), now)).to.equal(false);
    expect(signer.verify('alice', expires, '', now)).to.equal(false);
    expect(signer.verify('alice', Number.NaN, sig, now)).to.equal(false);
  });

  it('verifies on every process configured with the same secret', () => {
    const { expires, sig } = signer.sign('alice', now);
    expect(createLoginLinkSigner(Buffer.from(secret), 600_000).verify('alice', expires, sig, now)).to.equal(true);
  });
});
