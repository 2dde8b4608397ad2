import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/** The proof a login link carries: when it stops working (unix seconds) and the signature over the user and that time. */
export type LoginLinkProof = { expires: number; sig: string };

/** Signs and checks the links that start a user's OAuth login (`/auth/idp/login?user_id=…&expires=…&sig=…`). */
export type LoginLinkSigner = {
  /** The proof for a link that starts a login for `userId`, good for the configured lifetime. */
  sign(userId: string, now?: number): LoginLinkProof;
  /** True when `sig` was made by `sign` for this user and expiry, and the expiry has not passed. */
  verify(userId: string, expires: number, sig: string, now?: number): boolean;
};

/**
 * A signer keyed from `secret` (the token key): HKDF gives the links a key of their own, so
 * the token encryption key is never used for anything else. Every process configured with
 * the same secret checks the links of every other, so a link works on any worker or instance.
 */
export function createLoginLinkSigner(secret: Buffer, lifetimeMs: number): LoginLinkSigner {
  const key = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), 'svc-agent/oauth-login-link/v1', 32));
  const mac = (userId: string, expires: number) => createHmac('sha256', key).update(`${expires}\u0000${userId}`).digest();
  return {
    sign(userId, now = Date.now()) {
      const expires = Math.ceil((now + lifetimeMs) / 1000);
      return { expires, sig: mac(userId, expires).toString('base64url') };
    },
    verify(userId, expires, sig, now = Date.now()) {
      if (!Number.isSafeInteger(expires) || expires * 1000 <= now) return false;
      const presented = Buffer.from(sig, 'base64url');
      const expected = mac(userId, expires);
      return presented.length === expected.length && timingSafeEqual(presented, expected);
    },
  };
}
