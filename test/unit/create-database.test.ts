import { expect } from 'chai';
import { createDatabase, redactPassword } from '../../storage/index.js';

async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

describe('createDatabase', () => {
  describe('with a url', () => {
    const cases: Array<{ url: string; problem: RegExp }> = [
      { url: 'not a url at all', problem: /cannot be parsed as a URL/ },
      { url: 'mysql://app:hunter2@db.example:3306/agent', problem: /scheme "mysql" is not postgres or postgresql/ },
      { url: 'postgres://app:hunter2@/agent', problem: /cannot be parsed as a URL/ },
      { url: 'postgres:///agent', problem: /names no host/ },
      { url: 'postgresql://app:hunter2@db.example:5432', problem: /names no database/ },
      { url: 'postgres://app:hunter2@db.example:99999/agent', problem: /cannot be parsed as a URL/ },
    ];
    for (const { url, problem } of cases) {
      it(`names the problem without the password when the url is ${url}`, async () => {
        const failure = await failureOf(createDatabase({ url, dataDir: 'memory://', vector: false }));
        expect(failure.message).to.match(problem);
        expect(failure.message).to.match(/Expected <scheme>:\/\/<user>:<password>@<host>:<port>\/<database>/);
        expect(failure.message).to.not.contain('hunter2');
      });
    }

    it('masks a password holding characters a URL cannot when the url does not parse', async () => {
      const failure = await failureOf(createDatabase({ url: 'postgres://app:pa/ss@word@db:5432/agent', dataDir: 'memory://', vector: false }));
      expect(failure.message).to.contain('postgres://app:***@db:5432/agent');
      expect(failure.message).to.not.match(/pa\/ss|word@/);
    });

    it('opens a lazy pg pool when the url is valid', async () => {
      // Nothing listens on port 1: the pool only connects on the first query.
      const database = await createDatabase({ url: 'postgres://app:secret@127.0.0.1:1/agent', dataDir: 'memory://', vector: true });
      expect(database.kind).to.equal('pg');
      expect(database.hasVector).to.equal(true);
      await database.close();
    });
  });

  describe('redactPassword', () => {
    it('masks the password when the url has one', () => {
      expect(redactPassword('postgres://app:s3cr@t@db:5432/agent')).to.equal('postgres://app:***@db:5432/agent');
    });

    it('leaves the url as it is when there is no password', () => {
      expect(redactPassword('postgres://app@db:5432/agent')).to.equal('postgres://app@db:5432/agent');
      expect(redactPassword('postgres://db:5432/agent')).to.equal('postgres://db:5432/agent');
    });

    it('masks the password when the scheme is missing', () => {
      expect(redactPassword('app:secret@db:5432/agent')).to.equal('app:***@db:5432/agent');
    });
  });
});
