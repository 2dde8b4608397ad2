import { expect } from 'chai';
import { GroupCommit } from '../../storage/group-commit.js';

describe('GroupCommit', () => {
  it('sends the requests made together as one commit and gives each its own result', async () => {
    const commits: number[][] = [];
    const group = new GroupCommit<number, number>(async (requests) => {
      commits.push(requests);
      return requests.map((request) => request * 10);
    });
    const results = await Promise.all([group.run(1), group.run(2), group.run(3)]);
    expect(results).to.deep.equal([10, 20, 30]);
    expect(commits).to.deep.equal([[1, 2, 3]]);
    expect(await group.run(4)).to.equal(40);
    expect(commits).to.deep.equal([[1, 2, 3], [4]]);
  });

  it('fails only the request whose data the database refuses, retrying the others alone', async () => {
    const commits: number[][] = [];
    const group = new GroupCommit<number, number>(async (requests) => {
      commits.push(requests);
      if (requests.includes(2)) throw Object.assign(new Error('invalid input syntax'), { code: '22P02' });
      return requests;
    });
    const results = await Promise.allSettled([group.run(1), group.run(2), group.run(3)]);
    expect(results.map((result) => result.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    expect(commits).to.deep.equal([[1, 2, 3], [1], [2], [3]]);
  });

  it('fails every request of the commit when the database is unreachable, for each caller to retry', async () => {
    const group = new GroupCommit<number, number>(async () => {
      throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    });
    const results = await Promise.allSettled([group.run(1), group.run(2)]);
    expect(results.map((result) => result.status)).to.deep.equal(['rejected', 'rejected']);
  });

  it('commits the requests of one key one after the other, in order, while other keys join the first commit', async () => {
    const commits: string[][] = [];
    const group = new GroupCommit<string, string>(
      async (requests) => {
        commits.push(requests);
        return requests;
      },
      (request) => request.split(':')[0]!,
    );
    const results = await Promise.all(['a:1', 'b:1', 'a:2', 'a:3', 'c:1'].map((request) => group.run(request)));
    expect(results).to.deep.equal(['a:1', 'b:1', 'a:2', 'a:3', 'c:1']);
    expect(commits).to.deep.equal([['a:1', 'b:1', 'c:1'], ['a:2'], ['a:3']]);
  });

  it('retries alone only the requests of the refused commit when a key had to wait for a later one', async () => {
    const commits: string[][] = [];
    const group = new GroupCommit<string, string>(
      async (requests) => {
        commits.push(requests);
        if (requests.includes('a:2')) throw Object.assign(new Error('value too long'), { code: '22001' });
        return requests;
      },
      (request) => request.split(':')[0]!,
    );
    const results = await Promise.allSettled(['a:1', 'a:2', 'b:1'].map((request) => group.run(request)));
    expect(results.map((result) => result.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    // 'a:1' committed once: it is never sent again with the commit that failed.
    expect(commits.filter((commit) => commit.includes('a:1'))).to.have.length(1);
  });
});
