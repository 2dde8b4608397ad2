import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { CookieJar } from './cookie-jar.js';

/** A real OpenID provider (oidc-provider) on 127.0.0.1 with one confidential client. */
export type TestProvider = {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Successful token requests so far, by grant type. */
  grants: Record<string, number>;
  /** Every request the provider received (method and path), in order. */
  requests: string[];
  close(): Promise<void>;
};

/** Starts the provider on port 0; the client may redirect to `redirectUri` and gets refresh tokens. */
export async function startTestProvider(options: { redirectUri: string; accessTokenTtlS: number }): Promise<TestProvider> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'svc-test-client';
  const clientSecret = 'svc-test-secret';
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [options.redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' }] },
    cookies: { keys: ['svc-test-cookie-key'] },
    features: {
      devInteractions: { enabled: true },
      revocation: { enabled: true, allowedPolicy: async () => true },
    },
    scopes: ['openid', 'offline_access', 'email'],
    claims: { openid: ['sub'], email: ['email'] },
    issueRefreshToken: async () => true,
    // Every TTL given, so the provider does not print a notice for each default it falls back to.
    ttl: { AccessToken: options.accessTokenTtlS, AuthorizationCode: 60, IdToken: 3600, RefreshToken: 86_400, Grant: 86_400, Interaction: 600, Session: 86_400 },
    findAccount: async (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: async () => ({ sub: id, email: `${id}@example.test` }),
    }),
  });
  const grants: Record<string, number> = {};
  provider.on('grant.success', (ctx: { oidc: { params: { grant_type: string } } }) => {
    const type = ctx.oidc.params.grant_type;
    grants[type] = (grants[type] ?? 0) + 1;
  });
  const requests: string[] = [];
  server.on('request', (req) => requests.push(`${req.method} ${req.url}`));
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    grants,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * Plays the browser from the login link to the provider's redirect back: the dev
 * interactions' login form (as `account`), then the consent form (or `abort`). Returns the
 * callback URL the provider redirected to, not yet opened.
 */
export async function authorizeInBrowser(
  jar: CookieJar,
  loginUrl: string,
  options: { account: string; callbackPrefix: string; abort?: boolean },
): Promise<string> {
  let response = await jar.fetch(loginUrl);
  let url = new URL(loginUrl);
  for (let step = 0; step < 20; step += 1) {
    if (response.status >= 300 && response.status < 400) {
      url = new URL(response.headers.get('location')!, url);
      if (url.href.startsWith(options.callbackPrefix)) return url.href;
      response = await jar.fetch(url);
      continue;
    }
    const html = await response.text();
    if (response.status !== 200) throw new Error(`unexpected ${response.status} at ${url.href}: ${html.slice(0, 300)}`);
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
    if (!action || !prompt) throw new Error(`no interaction form at ${url.href}`);
    if (prompt === 'consent' && options.abort) {
      url = new URL(`${action.replace(/&amp;/g, '&')}/abort`, url);
      response = await jar.fetch(url);
      continue;
    }
    const form: Record<string, string> = prompt === 'login' ? { prompt, login: options.account, password: 'any' } : { prompt };
    url = new URL(action.replace(/&amp;/g, '&'), url);
    response = await jar.fetch(url, { method: 'POST', body: new URLSearchParams(form) });
  }
  throw new Error('the authorization did not come back to the callback');
}
