import { expect } from 'chai';
import { ProgressReporter } from '../../../gateway/mcp/progress-reporter.js';

describe('ProgressReporter', () => {
  /** A reporter whose notifications are recorded; `intervalMs` long enough that no timer fires during a test. */
  function reporter(intervalMs = 60_000) {
    const sent: Array<{ progress: number; message: string }> = [];
    const progress = new ProgressReporter(async (value, message) => {
      sent.push({ progress: value, message });
    }, intervalMs);
    return { progress, sent };
  }

  it('sends the first piece at once and coalesces the ones that follow within the interval', async () => {
    const { progress, sent } = reporter();
    progress.add('Hel');
    progress.add('lo, ');
    progress.add('world');
    await Promise.resolve();
    expect(sent).to.deep.equal([{ progress: 3, message: 'Hel' }]);
    await progress.flush();
    expect(sent).to.deep.equal([
      { progress: 3, message: 'Hel' },
      { progress: 12, message: 'lo, world' },
    ]);
  });

  it('counts characters so far in progress, so it only grows, and the messages joined are the text', async () => {
    const { progress, sent } = reporter(0);
    for (const piece of ['a', 'bc', '', 'def']) progress.add(piece);
    await progress.flush();
    expect(sent.map((note) => note.progress)).to.deep.equal([1, 3, 6]);
    expect(sent.map((note) => note.message).join('')).to.equal('abcdef');
  });

  it('sends nothing on flush when nothing is pending', async () => {
    const { progress, sent } = reporter();
    await progress.flush();
    expect(sent).to.deep.equal([]);
  });

  it('goes on after a notification that could not be sent', async () => {
    const seen: string[] = [];
    const progress = new ProgressReporter(async (_value, message) => {
      seen.push(message);
      if (message === 'a') throw new Error('the client went away');
    }, 0);
    progress.add('a');
    progress.add('b');
    await progress.flush();
    expect(seen).to.deep.equal(['a', 'b']);
  });
});
