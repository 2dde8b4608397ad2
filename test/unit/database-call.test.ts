import { expect } from 'chai';
import { ServiceError } from '../../runtime/service-error.js';
import { databaseCall, databaseCalls } from '../../storage/database-calls.js';

/** The error a rejected promise rejected with. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('the call did not fail');
    },
    (error: unknown) => error,
  );
}

describe('databaseCall', () => {
  it('fails with DATABASE_UNAVAILABLE, a 503 with Retry-After whose cause is the original error, when the database cannot be reached', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const lost = new Error('query failed', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) });
    const full = Object.assign(new Error('could not extend file: No space left on device'), { code: '53100' });
    for (const original of [refused, new Error('Connection terminated unexpectedly'), Object.assign(new Error('the database system is shutting down'), { code: '57P03' }), lost, full]) {
      const error = await rejection(databaseCall(Promise.reject(original)));
      expect(error, original.message).to.be.instanceOf(ServiceError);
      expect(error, original.message).to.include({ code: 'DATABASE_UNAVAILABLE', status: 503, cause: original });
      expect((error as ServiceError).headers).to.deep.equal({ 'Retry-After': '1' });
    }
  });

  it("leaves the database's refusals of the data or the statement, the service's own errors and faults of the code as they are", async () => {
    const dataError = Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' });
    const missingTable = Object.assign(new Error('relation "responses" does not exist'), { code: '42P01' });
    const notFound = new ServiceError('NOT_FOUND', 'no such response');
    const fault = new TypeError('An embedding must be a non-empty array of finite numbers.');
    for (const original of [dataError, missingTable, notFound, fault]) expect(await rejection(databaseCall(Promise.reject(original)))).to.equal(original);
    expect(await databaseCall(Promise.resolve(42))).to.equal(42);
  });
});

describe('databaseCalls', () => {
  it('makes each function of a store a databaseCall, with its arguments and results unchanged', async () => {
    const store = databaseCalls({
      async twice(value: number) {
        return value * 2;
      },
      async unreachable(): Promise<number> {
        throw new Error('Connection terminated unexpectedly');
      },
    });
    expect(await store.twice(21)).to.equal(42);
    expect(await rejection(store.unreachable())).to.include({ code: 'DATABASE_UNAVAILABLE' });
  });
});
