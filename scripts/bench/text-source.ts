/** Deterministic made-up text: sentences of words drawn from a fixed vocabulary, frequent words more often. */
export type TextSource = { sentence(words: number): string };

const VOCABULARY_SIZE = 5_000;
const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'ti', 'vo', 'de', 'po', 'an', 'el', 'is', 'or', 'um', 'ba', 'ce', 'fi', 'go', 'hu'];

/**
 * A text source seeded with `seed`: the same seed gives the same sentences. Words follow a
 * Zipf-like law, as in real text, so that texts share common words and differ in rare ones.
 */
export function createTextSource(seed: number): TextSource {
  const random = mulberry32(seed);
  const vocabulary = Array.from({ length: VOCABULARY_SIZE }, (_, index) => wordOf(index));
  const pick = () => vocabulary[Math.min(VOCABULARY_SIZE - 1, Math.floor(Math.exp(random() * Math.log(VOCABULARY_SIZE + 1)) - 1))]!;
  return { sentence: (words) => Array.from({ length: words }, pick).join(' ') };
}

/** A pronounceable word for a vocabulary index: its digits in base 20, one syllable each. */
function wordOf(index: number): string {
  let word = '';
  let rest = index + SYLLABLES.length;
  while (rest > 0) {
    word += SYLLABLES[rest % SYLLABLES.length];
    rest = Math.floor(rest / SYLLABLES.length);
  }
  return word;
}

/** A small seeded pseudo-random generator (mulberry32): numbers in [0, 1). */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
