import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sql } from 'kysely';
import type { OAuthStateRecord, OAuthStateStore, TokenStore } from '../../runtime/ports.js';
import { createOAuthStateRepository, createTokenRepository, migrateToLatest } from '../../storage/index.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

function pendingLogin(overrides: Partial<OAuthStateRecord> = {}): Omit<OAuthStateRecord, 'createdAt'> {
  return {
    state: randomUUID(),
    userId: 'user-a',
    provider: 'idp',
    codeVerifier: 'verifier',
    nonce: 'nonce',
    browserBinding: 'a'.repeat(64),
    expiresAt: new Date(Date.now() + 60_000),
    ...overrides,
  };
}

for (const target of databaseTargets()) {
  describe(`createTokenRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let store: TokenStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      store = createTokenRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it('returns the stored row when a token is put', async () => {
      const userId = randomUUID();
      const expiresAt = new Date('2031-02-03T04:05:06.789Z');
      const stored = await store.put({ userId, provider: 'idp', ciphertext: 'v1.a.b.c', expiresAt, scope: 'openid' });
      expect(await store.get(userId, 'idp')).to.deep.equal(stored);
      expect(stored).to.include({ userId, provider: 'idp', ciphertext: 'v1.a.b.c', scope: 'openid' });
      expect(stored.expiresAt?.toISOString()).to.equal(expiresAt.toISOString());
      expect(stored.createdAt).to.be.instanceOf(Date);
    });

    it('keeps a null expiry and scope when the provider gave none', async () => {
      const userId = randomUUID();
      await store.put({ userId, provider: 'idp', ciphertext: 'x', expiresAt: null, scope: null });
      expect(await store.get(userId, 'idp')).to.include({ expiresAt: null, scope: null });
    });

    it('replaces the row and restarts connected-at when the user connects again', async () => {
      const userId = randomUUID();
      await store.put({ userId, provider: 'idp', ciphertext: 'first', expiresAt: null, scope: null });
      await sql`update oauth_tokens set created_at = now() - interval '1 day' where user_id = ${userId}`.execute(database.db);
      const before = (await store.get(userId, 'idp'))!;
      const again = await store.put({ userId, provider: 'idp', ciphertext: 'second', expiresAt: null, scope: 'email' });
      expect(again).to.include({ ciphertext: 'second', scope: 'email' });
      expect(again.createdAt.getTime()).to.be.greaterThan(before.createdAt.getTime());
      expect(await store.listByUser(userId)).to.have.length(1);
    });

    it('lists only the given user’s rows', async () => {
      const [alice, bob] = [randomUUID(), randomUUID()];
      await store.put({ userId: alice, provider: 'idp', ciphertext: 'a', expiresAt: null, scope: null });
      await store.put({ userId: bob, provider: 'idp', ciphertext: 'b', expiresAt: null, scope: null });
      expect((await store.listByUser(alice)).map((row) => row.ciphertext)).to.deep.equal(['a']);
      expect(await store.get(alice, 'other')).to.equal(undefined);
    });

    it('replaces the token set only while the row still holds the expected ciphertext', async () => {
      const userId = randomUUID();
      await store.put({ userId, provider: 'idp', ciphertext: 'old', expiresAt: null, scope: null });
      expect(await store.replace('stale', { userId, provider: 'idp', ciphertext: 'lost', expiresAt: null, scope: null })).to.equal(false);
      expect(await store.replace('old', { userId, provider: 'idp', ciphertext: 'new', expiresAt: null, scope: 'email' })).to.equal(true);
      expect(await store.get(userId, 'idp')).to.include({ ciphertext: 'new', scope: 'email' });
    });

    it('does not recreate a row that was removed when a replace comes late', async () => {
      const userId = randomUUID();
      await store.put({ userId, provider: 'idp', ciphertext: 'old', expiresAt: null, scope: null });
      await store.remove(userId, 'idp');
      expect(await store.replace('old', { userId, provider: 'idp', ciphertext: 'new', expiresAt: null, scope: null })).to.equal(false);
      expect(await store.get(userId, 'idp')).to.equal(undefined);
    });

    it('removes the row only while it holds the expected ciphertext when one is given', async () => {
      const userId = randomUUID();
      await store.put({ userId, provider: 'idp', ciphertext: 'current', expiresAt: null, scope: null });
      expect(await store.remove(userId, 'idp', 'stale')).to.equal(false);
      expect(await store.remove(userId, 'idp', 'current')).to.equal(true);
      expect(await store.remove(userId, 'idp')).to.equal(false);
    });
  });

  describe(`createOAuthStateRepository on ${target.name}`, () => {
    let database: TestDatabase;
    let store: OAuthStateStore;

    before(async () => {
      database = await target.open({ vector: false });
      await migrateToLatest(database, { vector: false, embeddingDimensions: 3 });
      store = createOAuthStateRepository(database.db);
    });
    after(async () => {
      await database?.close();
    });

    it('returns the stored login once when its state is consumed', async () => {
      const login = pendingLogin({ nonce: null });
      await store.create(login);
      const taken = await store.consume(login.state);
      expect(taken).to.deep.include({ ...login, expiresAt: taken!.expiresAt });
      expect(taken!.expiresAt.getTime()).to.equal(login.expiresAt.getTime());
      expect(await store.consume(login.state)).to.equal(undefined);
    });

    it('gives the state to exactly one of two concurrent consumers', async () => {
      const peer = await database.openPeer();
      const peerStore = createOAuthStateRepository(peer.db);
      for (let round = 0; round < 5; round += 1) {
        const login = pendingLogin();
        await store.create(login);
        const results = await Promise.all([store.consume(login.state), peerStore.consume(login.state)]);
        expect(results.filter((result) => result !== undefined)).to.have.length(1);
      }
      await peer.close();
    });

    it('refuses and deletes an expired state when it is consumed', async () => {
      const login = pendingLogin({ expiresAt: new Date(Date.now() - 1000) });
      await store.create(login);
      expect(await store.consume(login.state)).to.equal(undefined);
      const { rows } = await sql`select 1 from oauth_states where state = ${login.state}`.execute(database.db);
      expect(rows).to.have.length(0);
    });

    it('refuses an unknown state', async () => {
      expect(await store.consume('never-issued')).to.equal(undefined);
    });

    it('purges only the expired states', async () => {
      const expired = pendingLogin({ expiresAt: new Date(Date.now() - 1000) });
      const live = pendingLogin();
      await store.create(expired);
      await store.create(live);
      expect(await store.purgeExpired()).to.be.at.least(1);
      expect(await store.consume(expired.state)).to.equal(undefined);
      expect(await store.consume(live.state)).not.to.equal(undefined);
    });
  });
}
