import { expect } from 'chai';
import { CompiledQuery } from 'kysely';
import { binaryTextArray } from '../../storage/binary-text-array.js';
import { hotStatement } from '../../storage/prepared-statements.js';
import { databaseTargets } from '../support/databases.js';
import type { TestDatabase } from '../support/databases.js';

/** A statement of the turn's kind (prepared on the embedded database): the elements of a `text[]` parameter, in order, with their positions. */
const ELEMENTS = hotStatement('select position::int, value from unnest($1::text[]) with ordinality as element(value, position) order by position');

for (const target of databaseTargets()) {
  describe(`binaryTextArray on ${target.name}`, () => {
    let database: TestDatabase;

    before(async () => {
      database = await target.open({ vector: false });
    });
    after(async () => {
      await database?.close();
    });

    async function elementsOf(values: Array<string | null>): Promise<Array<string | null>> {
      const { rows } = await database.db.executeQuery<{ position: number; value: string | null }>(CompiledQuery.raw(ELEMENTS, [binaryTextArray(values)]));
      expect(rows.map((row) => row.position)).to.deep.equal(values.map((_, index) => index + 1));
      return rows.map((row) => row.value);
    }

    it('gives the database each string as it was: quotes, backslashes, braces, commas, any script, empty text and nulls', async () => {
      const values = ['{"a":"\\"quoted\\"","b":[1,2]}', 'back\\slash, comma', '', null, 'naïve café 😀 — 日本語', 'NULL', 'x'.repeat(70_000)];
      expect(await elementsOf(values)).to.deep.equal(values);
    });

    it('gives the database an empty array as one without elements', async () => {
      expect(await elementsOf([])).to.deep.equal([]);
    });
  });
}
