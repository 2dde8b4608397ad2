import { PGlite } from '@electric-sql/pglite';
import { expect } from 'chai';
import { Kysely, sql } from 'kysely';
import { PGliteDialect } from '../../storage/pglite-dialect.js';

type Schema = { items: { id: number; label: string } };

describe('PGliteDialect', () => {
  let pglite: PGlite;
  let db: Kysely<Schema>;

  beforeEach(async () => {
    pglite = await PGlite.create('memory://');
    db = new Kysely<Schema>({ dialect: new PGliteDialect(pglite) });
    await sql`create table items (id integer primary key, label text not null)`.execute(db);
  });
  afterEach(async () => {
    await db.destroy();
  });

  async function labels(): Promise<string[]> {
    const rows = await db.selectFrom('items').select('label').orderBy('id').execute();
    return rows.map((row) => row.label);
  }

  it('reads back rows and counts affected rows', async () => {
    const inserted = await db.insertInto('items').values([{ id: 1, label: 'a' }, { id: 2, label: 'b' }]).executeTakeFirst();
    expect(inserted.numInsertedOrUpdatedRows).to.equal(2n);
    const updated = await db.updateTable('items').set({ label: 'c' }).where('id', '=', 2).executeTakeFirst();
    expect(updated.numUpdatedRows).to.equal(1n);
    expect(await labels()).to.deep.equal(['a', 'c']);
  });

  it('commits a transaction whole and rolls a failed one back whole', async () => {
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('items').values({ id: 1, label: 'kept' }).execute();
      await trx.insertInto('items').values({ id: 2, label: 'kept too' }).execute();
    });
    const failed = db.transaction().execute(async (trx) => {
      await trx.insertInto('items').values({ id: 3, label: 'dropped' }).execute();
      await trx.insertInto('items').values({ id: 1, label: 'duplicate key' }).execute();
    });
    await failed.then(
      () => expect.fail('the duplicate key should fail the transaction'),
      (error: { code?: string }) => expect(error.code).to.equal('23505'),
    );
    expect(await labels()).to.deep.equal(['kept', 'kept too']);
  });

  it('keeps a query from outside a transaction out of it: the query waits and is not rolled back with it', async () => {
    let insideStarted!: () => void;
    const started = new Promise<void>((resolve) => (insideStarted = resolve));
    let letInsideFinish!: () => void;
    const finishInside = new Promise<void>((resolve) => (letInsideFinish = resolve));

    const transaction = db
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto('items').values({ id: 1, label: 'inside' }).execute();
        insideStarted();
        await finishInside;
        throw new Error('roll back');
      })
      .catch((error: Error) => error.message);
    await started;
    let outsideDone = false;
    const outside = db
      .insertInto('items')
      .values({ id: 2, label: 'outside' })
      .execute()
      .then(() => (outsideDone = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(outsideDone, 'the outside insert must wait for the transaction').to.equal(false);
    letInsideFinish();

    expect(await transaction).to.equal('roll back');
    await outside;
    expect(await labels()).to.deep.equal(['outside']);
  });

  it('runs many concurrent queries and transactions without mixing them up', async () => {
    await Promise.all(
      Array.from({ length: 40 }, (_, index) =>
        index % 2 === 0
          ? db.insertInto('items').values({ id: index, label: `plain ${index}` }).execute()
          : db.transaction().execute(async (trx) => {
              await trx.insertInto('items').values({ id: index, label: `tx ${index}` }).execute();
              const own = await trx.selectFrom('items').select('label').where('id', '=', index).executeTakeFirstOrThrow();
              expect(own.label).to.equal(`tx ${index}`);
            }),
      ),
    );
    expect(await labels()).to.have.length(40);
  });

  it('applies transaction settings and supports savepoints', async () => {
    await db
      .transaction()
      .setIsolationLevel('serializable')
      .execute(async (trx) => {
        const level = await sql<{ level: string }>`select current_setting('transaction_isolation') as level`.execute(trx);
        expect(level.rows[0]?.level).to.equal('serializable');
      });

    const trx = await db.startTransaction().execute();
    await trx.insertInto('items').values({ id: 1, label: 'before savepoint' }).execute();
    const saved = await trx.savepoint('first').execute();
    await saved.insertInto('items').values({ id: 2, label: 'after savepoint' }).execute();
    const restored = await saved.rollbackToSavepoint('first').execute();
    await restored.commit().execute();
    expect(await labels()).to.deep.equal(['before savepoint']);
  });

  it('closes PGlite when Kysely is destroyed', async () => {
    await db.destroy();
    expect(pglite.closed).to.equal(true);
    db = new Kysely<Schema>({ dialect: new PGliteDialect(await PGlite.create('memory://')) });
  });
});
