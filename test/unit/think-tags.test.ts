import { expect } from 'chai';
import { ThinkTagSplitter, type TextPiece } from '../../runtime/llm/think-tags.js';

/** Feeds pieces through a splitter; returns what it let out, by kind, and every piece in order. */
function split(pieces: string[], startsInReasoning = false) {
  const splitter = new ThinkTagSplitter(startsInReasoning);
  const out: TextPiece[] = [];
  for (const piece of pieces) out.push(...splitter.push(piece));
  out.push(...splitter.end());
  const text = (kind: TextPiece['kind']) =>
    out
      .filter((piece) => piece.kind === kind)
      .map((piece) => piece.text)
      .join('');
  return { reasoning: text('reasoning'), content: text('content'), out, splitter };
}

/** Cuts a text into pieces of `size` characters, as a server streams it. */
function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let at = 0; at < text.length; at += size) out.push(text.slice(at, at + size));
  return out;
}

describe('ThinkTagSplitter', () => {
  const qwen3 = '<think>\nThe user greets me.\n</think>\n\nHello there!';

  it('takes reasoning in think tags out of the content whatever the pieces are cut at', () => {
    for (const size of [1, 2, 3, 5, 7, 100]) {
      const { reasoning, content, splitter } = split(pieces(qwen3, size));
      expect({ size, reasoning, content }).to.deep.equal({ size, reasoning: '\nThe user greets me.\n', content: 'Hello there!' });
      expect(splitter.sawTags).to.equal(true);
      expect(splitter.sawImplicitOpen).to.equal(false);
    }
  });

  it('lets content without tags out as it comes, holding back only what may begin a tag', () => {
    const splitter = new ThinkTagSplitter();
    expect(splitter.push('Hello ')).to.deep.equal([{ kind: 'content', text: 'Hello ' }]);
    expect(splitter.push('a <')).to.deep.equal([{ kind: 'content', text: 'a ' }]);
    expect(splitter.push('b> c')).to.deep.equal([{ kind: 'content', text: '<b> c' }]);
    expect(splitter.end()).to.deep.equal([]);
  });

  it('holds the start of a reply that may become the opening tag, and lets it out when it does not', () => {
    const splitter = new ThinkTagSplitter();
    expect(splitter.push('  <th')).to.deep.equal([]);
    expect(splitter.push('ing>')).to.deep.equal([{ kind: 'content', text: '  <thing>' }]);
  });

  it('treats text before a closing tag never opened as reasoning when nothing was let out yet (a template that opens the tag)', () => {
    const { reasoning, content, splitter } = split(['Okay, the user wants 2+2.\n</think>\n\n2 + 2 = 4.']);
    expect(reasoning).to.equal('Okay, the user wants 2+2.\n');
    expect(content).to.equal('2 + 2 = 4.');
    expect(splitter.sawImplicitOpen).to.equal(true);
  });

  it('keeps text already let out as content when a closing tag follows it, and drops the tag', () => {
    const { reasoning, content, splitter } = split(['Okay, thinking', ' more</th', 'ink>\n\nAnswer.']);
    expect(reasoning).to.equal('');
    expect(content).to.equal('Okay, thinking moreAnswer.');
    expect(splitter.sawImplicitOpen).to.equal(true);
  });

  it('starts in reasoning for a model known to open the tag in its template', () => {
    const { reasoning, content, out } = split(pieces('Hmm, 2+2.\n</think>\n\n4', 3), true);
    expect(reasoning).to.equal('Hmm, 2+2.\n');
    expect(content).to.equal('4');
    expect(out[0]).to.deep.equal({ kind: 'reasoning', text: 'Hmm' });
  });

  it('strips an opening tag the model wrote although its template opened it', () => {
    const { reasoning, content } = split(['<th', 'ink>\nplan', '</think>done'], true);
    expect(reasoning).to.equal('\nplan');
    expect(content).to.equal('done');
  });

  it('gives the text again as content when a reply begun in reasoning never closes the tag', () => {
    const { reasoning, content, splitter } = split(['Just an answer', ' without thinking.'], true);
    expect(reasoning).to.equal('Just an answer without thinking.');
    expect(content).to.equal('Just an answer without thinking.');
    expect(splitter.reclassified).to.equal(true);
  });

  it('leaves a reply cut off inside its reasoning as reasoning only', () => {
    const { reasoning, content } = split(['<think>I was thinking about']);
    expect(reasoning).to.equal('I was thinking about');
    expect(content).to.equal('');
  });

  it('leaves tags written in the middle of a reply to it, as text', () => {
    for (const size of [1, 4, 100]) {
      const text = 'Use tags like this: <think>x</think> and so on.';
      const { reasoning, content } = split(pieces(text, size));
      expect({ size, reasoning, content }).to.deep.equal({ size, reasoning: '', content: text });
    }
  });
});
