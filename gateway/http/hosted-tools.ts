import type { RequestHandler } from 'express';
import type { Logger } from 'winston';
import { z } from 'zod';

/**
 * A tool type worth naming back: clients such as Codex CLI send hosted tools (`web_search`,
 * `namespace`, `local_shell`, `custom` …) by default; a `type` that is no such name (or could
 * not go in a header) makes the tool an unknown shape, refused as one.
 */
const TOOL_TYPE = /^[a-z][a-z0-9_.-]{0,63}$/i;

/** True for a tool the service does not run: an object whose `type` names a kind other than `function`. */
export function isHostedTool(tool: unknown): tool is { type: string } {
  if (typeof tool !== 'object' || tool === null || Array.isArray(tool)) return false;
  const { type } = tool as { type?: unknown };
  return typeof type === 'string' && type !== 'function' && TOOL_TYPE.test(type);
}

/**
 * A request's `tools` as the function tools `schema` validates, the hosted ones left out. A
 * hosted tool is set aside before validation but keeps its place, so an error names a bad
 * tool by its index in the request; anything else that is not a valid function tool (a
 * string, an object with no `type`) is still refused.
 */
export function functionToolsOf<T>(schema: z.ZodType<T>) {
  // JSON holds no undefined: an undefined entry can only be a hosted tool set aside here.
  const entry = z.preprocess((tool) => (isHostedTool(tool) ? undefined : tool), schema.optional());
  return z.array(entry).transform((tools) => tools.filter((tool): tool is T => tool !== undefined));
}

/** The types of a request body's hosted tools, in the order sent, each once. */
export function hostedToolTypes(body: unknown): string[] {
  const tools = (body as { tools?: unknown } | null)?.tools;
  if (!Array.isArray(tools)) return [];
  return [...new Set(tools.filter(isHostedTool).map((tool) => tool.type))];
}

/**
 * For the routes that take `tools` (chat completions, the Responses API): names the types of
 * the hosted tools the request's parser leaves out in the `X-Ignored-Tools` response header,
 * set before anything is sent, streamed or not, and logs them at info, so a client that
 * expected a web search learns why there was none instead of being refused.
 */
export function createIgnoredToolsNotice(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const ignored = hostedToolTypes(req.body);
    if (ignored.length > 0) {
      res.set('X-Ignored-Tools', ignored.join(', '));
      logger.info(`ignored tools of types the service does not run: ${ignored.join(', ')}`, { requestId: res.locals.requestId, path: req.path, ignoredTools: ignored });
    }
    next();
  };
}
