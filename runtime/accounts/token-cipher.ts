import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** Whose token a ciphertext holds: bound into it as associated data. */
export type TokenBinding = { userId: string; provider: string };

/** Encrypts token sets at rest, each bound to its user and provider. */
export type TokenCipher = {
  /** `v1.<iv>.<tag>.<ciphertext>` (base64url parts) of `plaintext`, bound to `binding`. */
  encrypt(plaintext: string, binding: TokenBinding): string;
  /** The plaintext; throws a TokenDecryptionError when the text was tampered with, belongs to another binding or key. */
  decrypt(ciphertext: string, binding: TokenBinding): string;
};

/** A stored token that cannot be read back: wrong key, wrong user or provider, or altered. */
export class TokenDecryptionError extends Error {
  override readonly name = 'TokenDecryptionError';
}

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const VERSION = 'v1';
const ALGORITHM = 'aes-256-gcm';

/**
 * Reads `oauth.token_key`: 32 bytes written as 64 hex digits or as base64 (standard or
 * url-safe). Throws an Error that says what is expected, never echoing the key.
 */
export function parseTokenKey(text: string): Buffer {
  const trimmed = text.trim();
  if (trimmed === '') {
    throw new Error('oauth.token_key (OAUTH_TOKEN_KEY) is empty; it must be 32 random bytes, base64 or hex (generate one with `openssl rand -base64 32`).');
  }
  let key: Buffer | undefined;
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) key = Buffer.from(trimmed, 'hex');
  else if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) key = Buffer.from(trimmed, 'base64');
  if (key?.length !== KEY_BYTES) {
    const found = key ? `${key.length} bytes` : 'neither base64 nor hex';
    throw new Error(
      `oauth.token_key (OAUTH_TOKEN_KEY) must be 32 bytes, base64 or hex; it is ${found} (generate one with \`openssl rand -base64 32\`).`,
    );
  }
  return key;
}

/** An AES-256-GCM cipher over `key` (a 32-byte Buffer, or its base64 / hex text). */
export function createTokenCipher(key: Buffer | string): TokenCipher {
  const secret = typeof key === 'string' ? parseTokenKey(key) : key;
  if (secret.length !== KEY_BYTES) throw new Error(`The token key must be ${KEY_BYTES} bytes; it is ${secret.length}.`);

  return {
    encrypt(plaintext: string, binding: TokenBinding): string {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv(ALGORITHM, secret, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(associatedData(binding));
      const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return [VERSION, iv, cipher.getAuthTag(), data].map((part) => (typeof part === 'string' ? part : part.toString('base64url'))).join('.');
    },

    decrypt(ciphertext: string, binding: TokenBinding): string {
      const parts = ciphertext.split('.');
      if (parts.length !== 4 || parts[0] !== VERSION) throw new TokenDecryptionError('The stored token is not in a known format.');
      const [iv, tag, data] = parts.slice(1).map((part) => Buffer.from(part, 'base64url')) as [Buffer, Buffer, Buffer];
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new TokenDecryptionError('The stored token is not in a known format.');
      try {
        const decipher = createDecipheriv(ALGORITHM, secret, iv, { authTagLength: TAG_BYTES });
        decipher.setAAD(associatedData(binding));
        decipher.setAuthTag(tag);
        return Buffer.concat([decipher.update(data), decipher.final()]).toString('utf8');
      } catch (error) {
        throw new TokenDecryptionError('The stored token could not be decrypted (another key, user or provider, or altered).', { cause: error });
      }
    },
  };
}

/** A JSON array keeps the fields apart whatever characters a user id holds. */
function associatedData(binding: TokenBinding): Buffer {
  return Buffer.from(JSON.stringify([VERSION, binding.provider, binding.userId]), 'utf8');
}
