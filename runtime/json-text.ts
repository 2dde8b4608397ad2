/** A lone UTF-16 surrogate as JSON.stringify escapes it (paired ones are written as they are). */
const ESCAPED_SURROGATE = /\\ud[89a-f][0-9a-f]{2}/i;

/** A lone surrogate in a string (with the `u` flag a pair is one code point, not of this category). */
const LONE_SURROGATE = /\p{Cs}/gu;

/**
 * JSON text that PostgreSQL's json and jsonb types accept. They refuse the escape of a lone
 * UTF-16 surrogate, which a reply or tool result can hold (a JSON `\ud800` from the LLM or a
 * tool server); such text is replaced by U+FFFD, as the text columns store it, instead of
 * failing the write and losing the turn. Values without one are stringified once.
 */
export function toJsonText(value: unknown): string {
  const text = JSON.stringify(value);
  return holdsLoneSurrogate(text) ? withoutLoneSurrogates(value) : text;
}

/**
 * Whether JSON text (JSON.stringify's, whose escapes are lower case) holds an escaped lone
 * surrogate. Most text has no `\ud` at all, which `includes` tells some ten times faster
 * than the expression.
 */
function holdsLoneSurrogate(text: string): boolean {
  return text.includes('\\ud') && ESCAPED_SURROGATE.test(text);
}

function withoutLoneSurrogates(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'string' ? item.replace(LONE_SURROGATE, '\uFFFD') : item));
}
