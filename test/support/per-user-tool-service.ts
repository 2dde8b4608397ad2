import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './mcp-fixtures.js';
import { testServerStdioConfig } from './mcp-test-server.js';
import { startTestProvider, type TestProvider } from './oidc-test-provider.js';
import { startTestService, type TestService } from './service-harness.js';

/** A service with the per-user test tool server `mine` and a real OpenID provider for its accounts. */
export type PerUserToolService = {
  harness: TestService;
  provider: TestProvider;
  /** Where the browser reaches the service (its OAuth login and callback). */
  publicUrl: string;
  close(): Promise<void>;
};

/** Starts it; `env` adds to (or overrides) the service's environment, e.g. API_KEYS. */
export async function startPerUserToolService(env: Record<string, string> = {}): Promise<PerUserToolService> {
  const folder = mkdtempSync(join(tmpdir(), 'svc-per-user-'));
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  const provider = await startTestProvider({ redirectUri: `${publicUrl}/auth/idp/callback`, accessTokenTtlS: 300 });
  const server = testServerStdioConfig({ per_user: true }) as { command: string; args: string[]; cwd?: string };
  const configFile = join(folder, 'deployment.yaml');
  writeFileSync(
    configFile,
    [
      'mcp_servers:',
      '  mine:',
      '    transport: stdio',
      `    command: ${JSON.stringify(server.command)}`,
      `    args: ${JSON.stringify(server.args)}`,
      `    cwd: ${JSON.stringify(server.cwd)}`,
      '    per_user: true',
      '',
    ].join('\n'),
  );
  let harness: TestService;
  try {
    harness = await startTestService({
      env: {
        CONFIG_FILE: configFile,
        APP_PORT: String(port),
        APP_PUBLIC_URL: publicUrl,
        OAUTH_ISSUER_URL: provider.issuer,
        OAUTH_CLIENT_ID: provider.clientId,
        OAUTH_CLIENT_SECRET: provider.clientSecret,
        OAUTH_SCOPES: 'openid email offline_access',
        OAUTH_REDIRECT_URL: `${publicUrl}/auth/idp/callback`,
        OAUTH_TOKEN_KEY: randomBytes(32).toString('base64'),
        OAUTH_ALLOW_INSECURE: 'true',
        ...env,
      },
    });
  } catch (error) {
    await provider.close();
    rmSync(folder, { recursive: true, force: true });
    throw error;
  }
  return {
    harness,
    provider,
    publicUrl,
    async close() {
      await harness.close();
      await provider.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}
