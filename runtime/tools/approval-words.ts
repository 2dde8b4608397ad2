/**
 * The word rule of chat completions: a user message answers the tool calls a reply asked
 * about (`require_approval`) by being one of the configured words. A leaf module (it imports
 * nothing), so that configuration can check the words with the same rule.
 */

/** The words that answer approval requests in a message (`tools.approval_words`, `tools.denial_words`), normalised. */
export type ApprovalWords = { approve: string[]; deny: string[] };

/**
 * A message or a configured word reduced to what the word rule compares: trimmed, lower case,
 * without trailing punctuation (`Yes!` and ` OK. ` are `yes` and `ok`).
 */
export function normaliseWord(text: string): string {
  return text.trim().toLowerCase().replace(/[\p{P}\s]+$/u, '');
}

/** Whether a message approves (`approve`), is a plain denial word (`deny`), or says something else (`other`). */
export function approvalWordOf(text: string, words: ApprovalWords): 'approve' | 'deny' | 'other' {
  const word = normaliseWord(text);
  if (words.approve.includes(word)) return 'approve';
  if (words.deny.includes(word)) return 'deny';
  return 'other';
}
