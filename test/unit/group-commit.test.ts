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
});
