/** A piece of a reply's text, sorted: the model's reasoning, or the reply itself. */
export type TextPiece = { kind: 'reasoning' | 'content'; text: string };

const OPEN = '<think>';
const CLOSE = '</think>';

type Mode = 'start' | 'reasoning' | 'after_reasoning' | 'content';

/**
 * Takes reasoning written inline in a reply's content, as Qwen3, DeepSeek-R1 and others do when
 * the server runs no reasoning parser: `<think>…</think>` at the start of the reply, the tags
 * split across streamed pieces as they come. Only the text that may be part of a tag is held
 * back. A model whose template opens the tag itself (R1's ends the prompt with `<think>`)
 * writes only the closing one: its text before it is reasoning when nothing of the reply was
 * let out yet (a whole body, or the first piece), and `sawImplicitOpen` tells the caller to
 * start its next replies in reasoning (`startsInReasoning`). Such a reply that never closes the
 * tag was no reasoning after all: `end` gives its text again as content (`reclassified`).
 */
export class ThinkTagSplitter {
  private mode: Mode;
  private held = '';
  private contentLetOut = false;
  /** The reasoning of a reply begun in reasoning without its tag, until it closes. */
  private implicitReasoning = '';
  private closed = false;
  /** A reply begun in reasoning was checked for a `<think>` the model wrote anyway. */
  private leadingChecked = false;
  /** The end of the content let out, where an opening tag written as text may have begun. */
  private contentTail = '';
  /** The reply held reasoning in tags (opened, or closed only). */
  sawTags = false;
  /** The reply closed a tag it never opened. */
  sawImplicitOpen = false;
  /** `end` gave reasoning of an unclosed implicit tag again as content. */
  reclassified = false;

  constructor(private readonly startsInReasoning = false) {
    this.mode = startsInReasoning ? 'reasoning' : 'start';
  }

  /** The sorted pieces of the next piece of content. */
  push(piece: string): TextPiece[] {
    this.held += piece;
    const out: TextPiece[] = [];
    for (;;) {
      const before = this.mode;
      this.step(out);
      if (this.mode === before) break;
    }
    return out;
  }

  /** What is still held, once the reply is complete. */
  end(): TextPiece[] {
    const out: TextPiece[] = [];
    const rest = this.held;
    this.held = '';
    if (this.mode === 'reasoning') {
      if (rest !== '') this.emit(out, 'reasoning', rest);
      if (this.startsInReasoning && !this.closed && this.implicitReasoning !== '') {
        this.reclassified = true;
        this.emit(out, 'content', this.implicitReasoning);
      }
    } else if (this.mode !== 'after_reasoning' && rest !== '') {
      this.emit(out, 'content', rest);
    }
    return out;
  }

  private step(out: TextPiece[]): void {
    switch (this.mode) {
      case 'start':
        return this.atStart();
      case 'reasoning':
        return this.inReasoning(out);
      case 'after_reasoning':
        return this.afterReasoning();
      case 'content':
        return this.inContent(out);
    }
  }

  private atStart(): void {
    const text = this.held.trimStart();
    if (text.startsWith(OPEN)) {
      this.held = text.slice(OPEN.length);
      this.sawTags = true;
      this.mode = 'reasoning';
    } else if (text !== '' && !OPEN.startsWith(text)) {
      this.mode = 'content';
    } // else it may still become the tag
  }

  private inReasoning(out: TextPiece[]): void {
    if (!this.leadingChecked && this.startsInReasoning) {
      // A model whose template opened the tag may write it anyway (DeepSeek-R1-0528 does).
      const text = this.held.trimStart();
      if (text === '' || (OPEN.startsWith(text) && text !== OPEN)) return;
      this.leadingChecked = true;
      if (text.startsWith(OPEN)) this.held = text.slice(OPEN.length);
    }
    const close = this.held.indexOf(CLOSE);
    if (close >= 0) {
      this.emit(out, 'reasoning', this.held.slice(0, close));
      this.held = this.held.slice(close + CLOSE.length);
      this.sawTags = true;
      this.closed = true;
      this.mode = 'after_reasoning';
      return;
    }
    const keep = partialTagLength(this.held, CLOSE);
    this.emit(out, 'reasoning', this.held.slice(0, this.held.length - keep));
    this.held = this.held.slice(this.held.length - keep);
  }

  /** The blank lines after the reasoning are not part of the reply. */
  private afterReasoning(): void {
    const text = this.held.trimStart();
    this.held = text;
    if (text !== '') this.mode = 'content';
  }

  private inContent(out: TextPiece[]): void {
    // A closing tag can end reasoning whose tag the template opened, until the reply has tags of its own.
    const close = this.sawTags ? -1 : this.held.indexOf(CLOSE);
    if (close >= 0 && this.held.slice(0, close).includes(OPEN)) {
      this.sawTags = true; // tags written as text: the reply is about them
    } else if (close >= 0) {
      this.sawTags = true;
      this.sawImplicitOpen = true;
      this.closed = true;
      this.emit(out, this.contentLetOut ? 'content' : 'reasoning', this.held.slice(0, close));
      this.held = this.held.slice(close + CLOSE.length);
      this.mode = 'after_reasoning';
      return;
    }
    const keep = this.sawTags ? 0 : partialTagLength(this.held, CLOSE);
    const text = this.held.slice(0, this.held.length - keep);
    // Most pieces hold no '<' and follow none: no tag can be in them, nor begin in their end.
    if (!this.sawTags && (this.contentTail !== '' || text.includes('<'))) {
      const seen = this.contentTail + text;
      if (seen.includes(OPEN)) this.sawTags = true;
      const tail = seen.slice(-OPEN.length);
      this.contentTail = tail.includes('<') ? tail : '';
    }
    this.emit(out, 'content', text);
    this.held = this.held.slice(this.held.length - keep);
  }

  private emit(out: TextPiece[], kind: TextPiece['kind'], text: string): void {
    if (text === '') return;
    if (kind === 'content') this.contentLetOut = true;
    else if (this.startsInReasoning && !this.closed) this.implicitReasoning += text;
    const last = out.at(-1);
    if (last?.kind === kind) last.text += text;
    else out.push({ kind, text });
  }
}

/** The length of the longest end of `text` that begins `tag` (text that may become the tag). */
export function partialTagLength(text: string, tag: string): number {
  const first = tag.charCodeAt(0);
  // Only an end that starts with the tag's first character can begin it; most pieces have none.
  for (let at = Math.max(0, text.length - tag.length + 1); at < text.length; at++) {
    if (text.charCodeAt(at) === first && beginsTag(text, at, tag)) return text.length - at;
  }
  return 0;
}

/** Whether `text` from `at` to its end is the beginning of `tag`. */
function beginsTag(text: string, at: number, tag: string): boolean {
  for (let i = at + 1; i < text.length; i++) if (text.charCodeAt(i) !== tag.charCodeAt(i - at)) return false;
  return true;
}
