import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { createTokenCipher, parseTokenKey, TokenDecryptionError } from '../../runtime/accounts/token-cipher.js';

const KEY = randomBytes(32);
const ALICE = { userId: 'alice', provider: 'idp' };
const SECRET = '{"access_token":"at-123","refresh_token":"rt-456"}';

function decryptError(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  throw new Error('expected decrypt to throw');
}

describe('createTokenCipher', () => {
  it('decrypts what it encrypted when the binding is the same', () => {
    const cipher = createTokenCipher(KEY);
    expect(cipher.decrypt(cipher.encrypt(SECRET, ALICE), ALICE)).to.equal(SECRET);
  });

  it('writes a versioned text that holds no plaintext when it encrypts', () => {
    const text = createTokenCipher(KEY).encrypt(SECRET, ALICE);
    expect(text).to.match(/^v1\.[\w-]{16}\.[\w-]{22}\.[\w-]+$/);
    expect(text).not.to.include('at-123');
    expect(Buffer.from(text.split('.')[3]!, 'base64url').toString('utf8')).not.to.include('at-123');
  });

  it('uses a fresh IV each time when the same plaintext is encrypted twice', () => {
    const cipher = createTokenCipher(KEY);
    expect(cipher.encrypt(SECRET, ALICE)).not.to.equal(cipher.encrypt(SECRET, ALICE));
  });

  it('refuses to decrypt when the row is read for another user', () => {
    const cipher = createTokenCipher(KEY);
    const text = cipher.encrypt(SECRET, ALICE);
    expect(decryptError(() => cipher.decrypt(text, { userId: 'bob', provider: 'idp' }))).to.be.instanceOf(TokenDecryptionError);
  });

  it('refuses to decrypt when the row is read for another provider', () => {
    const cipher = createTokenCipher(KEY);
    const text = cipher.encrypt(SECRET, ALICE);
    expect(decryptError(() => cipher.decrypt(text, { userId: 'alice', provider: 'other' }))).to.be.instanceOf(TokenDecryptionError);
  });

  it('keeps user and provider apart when their characters could run together', () => {
    const cipher = createTokenCipher(KEY);
    const text = cipher.encrypt(SECRET, { userId: 'a:b', provider: 'idp' });
    expect(decryptError(() => cipher.decrypt(text, { userId: 'b', provider: 'idp:a' }))).to.be.instanceOf(TokenDecryptionError);
  });

  for (const part of [1, 2, 3]) {
    it(`refuses to decrypt when part ${part} of the text was tampered with`, () => {
      const cipher = createTokenCipher(KEY);
      const parts = cipher.encrypt(SECRET, ALICE).split('.');
      const bytes = Buffer.from(parts[part]!, 'base64url');
      bytes[0] = bytes[0]! ^ 0x01;
      parts[part] = bytes.toString('base64url');
      expect(decryptError(() => cipher.decrypt(parts.join('.'), ALICE))).to.be.instanceOf(TokenDecryptionError);
    });
  }

  it('refuses to decrypt when the version is unknown', () => {
    const cipher = createTokenCipher(KEY);
    const text = cipher.encrypt(SECRET, ALICE).replace(/^v1\./, 'v2.');
    expect(decryptError(() => cipher.decrypt(text, ALICE))).to.be.instanceOf(TokenDecryptionError);
  });

  it('refuses to decrypt when another key encrypted the text', () => {
    const text = createTokenCipher(randomBytes(32)).encrypt(SECRET, ALICE);
    expect(decryptError(() => createTokenCipher(KEY).decrypt(text, ALICE))).to.be.instanceOf(TokenDecryptionError);
  });

  it('accepts the key as base64 and as hex when given as text', () => {
    const text = createTokenCipher(KEY.toString('base64')).encrypt(SECRET, ALICE);
    expect(createTokenCipher(KEY.toString('hex')).decrypt(text, ALICE)).to.equal(SECRET);
    expect(createTokenCipher(KEY.toString('base64url')).decrypt(text, ALICE)).to.equal(SECRET);
  });

  it('throws a clear error without echoing the key when the key is not 32 bytes', () => {
    const short = randomBytes(16).toString('base64');
    expect(() => createTokenCipher(short)).to.throw(/must be 32 bytes, base64 or hex; it is 16 bytes.*openssl rand -base64 32/);
    try {
      createTokenCipher(short);
    } catch (error) {
      expect((error as Error).message).not.to.include(short);
    }
  });

  it('throws a clear error when the key is empty or not base64', () => {
    expect(() => parseTokenKey('')).to.throw(/OAUTH_TOKEN_KEY.*empty/);
    expect(() => parseTokenKey('not a key!')).to.throw(/neither base64 nor hex/);
  });

  it('throws when a key buffer is not 32 bytes', () => {
    expect(() => createTokenCipher(randomBytes(31))).to.throw(/must be 32 bytes; it is 31/);
  });
});
