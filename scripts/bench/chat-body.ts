/** The client's system prompt of every bench turn. */
export const SYSTEM_PROMPT =
  'You are a helpful support assistant for an online bookshop. Answer briefly and politely, ask for an order number when one is needed, and never invent prices or delivery dates.';

/** The user messages of the bench's turns: about 50 words each, so the echo reply is about as long as a short real answer. */
export const USER_MESSAGES = [
  'Hello, I ordered three paperback novels last Tuesday and the tracking page still says the parcel is being prepared. I need them before my trip on Friday morning. Could you check whether the order has shipped, and if not, whether it can still be sent with express delivery at no extra cost to me?',
  'Good evening. I received a hardcover edition with a damaged spine and several creased pages in the middle. The book was meant as a birthday present for my sister next week. What is the quickest way to get a replacement, and do I need to send the damaged copy back before you ship it?',
  'Hi there, I am trying to redeem a gift card that a colleague gave me, but the checkout keeps rejecting the code with an error about an invalid format. I have typed it carefully several times. Is there anything special about the format, or can you apply the balance to my account manually?',
  'Hello again. Last month you recommended a series of historical mysteries set in Venice, and I enjoyed the first two books very much. Could you tell me which volume comes next, whether it is available in paperback, and roughly how long delivery to a small town in the north usually takes?',
] as const;

/** The words that make the scripted LLM call server-everything's echo tool, then answer with its result. */
export const TOOL_CALL_WORDS = ' [[tool:everything__echo {"message":"order status"}]]';

/**
 * Serialised chat request bodies (a system prompt and a ~50-word user message), rotated by
 * request number; with `toolTurns`, each message asks the scripted LLM to call a tool first.
 */
export function chatBodies(stream: boolean, toolTurns = false): Buffer[] {
  return conversationBodies(
    USER_MESSAGES.map((message) => (toolTurns ? `${message}${TOOL_CALL_WORDS}` : message)),
    { stream, history: 0 },
  );
}

/**
 * A body per user message: the system prompt, `history` messages of an earlier conversation
 * (the other messages, each followed by the scripted LLM's echo of it, as a client that
 * keeps the conversation sends them), and the message.
 */
export function conversationBodies(messages: string[], { stream, history }: { stream: boolean; history: number }): Buffer[] {
  return messages.map((content, index) => {
    const earlier = Array.from({ length: Math.ceil(history / 2) }, (_, turn) => messages[(index + turn + 1) % messages.length]!);
    const past = earlier.flatMap((message) => [
      { role: 'user', content: message },
      { role: 'assistant', content: `Echo: ${message}` },
    ]);
    return Buffer.from(
      JSON.stringify({
        model: 'svc-agent',
        messages: [{ role: 'system', content: SYSTEM_PROMPT }, ...past.slice(past.length - history), { role: 'user', content }],
        ...(stream ? { stream: true } : {}),
      }),
    );
  });
}

/**
 * User messages (one per bench message) whose echo the scripted LLM streams in exactly
 * `pieces` content chunks: it sends `Echo: <message>` a word at a time, so a message has
 * `pieces - 1` words, the bench's messages repeated; with `paceMs`, its last word is the
 * magic word that spaces the chunks that far apart (`[[pace:MS]]`).
 */
export function echoedMessages(pieces: number, paceMs?: number): string[] {
  const words = USER_MESSAGES.join(' ').split(' ');
  const own = pieces - 1 - (paceMs === undefined ? 0 : 1);
  let start = 0;
  return USER_MESSAGES.map((message) => {
    const text = Array.from({ length: own }, (_, word) => words[(start + word) % words.length]).join(' ');
    start += message.split(' ').length;
    return paceMs === undefined ? text : `${text} [[pace:${paceMs}]]`;
  });
}
