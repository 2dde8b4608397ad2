import { allowInsecureRequests, discovery, None } from 'openid-client';
import type { Configuration } from 'openid-client';
import { ServiceError } from '../service-error.js';

/** Where the identity provider is and who the service is to it. */
export type OidcSettings = {
  /** OpenID Connect issuer, e.g. https://accounts.google.com. */
  issuerUrl: string;
  clientId: string;
  /** Empty for a public client (PKCE only, no client authentication). */
  clientSecret: string;
  /** Allow an http:// issuer (development and tests only). */
  allowInsecure: boolean;
  /** Time-out of each request to the provider, in seconds (default 10). */
  timeoutSeconds?: number;
  /** After a failed discovery, calls within this many ms fail at once with the same error (default 5000). */
  retryAfterMs?: number;
};

/** The openid-client Configuration, discovered on first use. */
export type OidcConfigurationSource = () => Promise<Configuration>;

const DEFAULT_TIMEOUT_SECONDS = 10;
const DEFAULT_RETRY_AFTER_MS = 5000;

/**
 * Discovers the provider lazily and caches the result. A failed discovery is not cached
 * (a provider down at start-up never stops the service): later calls try again, at most
 * once per `retryAfterMs`. Concurrent callers share one discovery. Failures are
 * ServiceErrors with code UPSTREAM_UNAVAILABLE.
 */
export function createOidcConfigurationSource(settings: OidcSettings, discover: typeof discovery = discovery): OidcConfigurationSource {
  const issuer = new URL(settings.issuerUrl);
  const retryAfterMs = settings.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS;
  let configuration: Configuration | undefined;
  let pending: Promise<Configuration> | undefined;
  let lastFailure: { at: number; error: ServiceError } | undefined;

  const run = async (): Promise<Configuration> => {
    try {
      const found = await discover(
        issuer,
        settings.clientId,
        settings.clientSecret || undefined,
        settings.clientSecret ? undefined : None(),
        {
          execute: settings.allowInsecure ? [allowInsecureRequests] : [],
          timeout: settings.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS,
        },
      );
      configuration = found;
      lastFailure = undefined;
      return found;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const failure = new ServiceError('UPSTREAM_UNAVAILABLE', `The identity provider at ${issuer.origin} could not be reached for discovery: ${reason}`, {
        cause: error,
      });
      lastFailure = { at: Date.now(), error: failure };
      throw failure;
    }
  };

  return async () => {
    if (configuration) return configuration;
    if (pending) return pending;
    if (lastFailure && Date.now() - lastFailure.at < retryAfterMs) throw lastFailure.error;
    // Cleared once settled, even when the discovery fails before its first await.
    pending = run().finally(() => {
      pending = undefined;
    });
    return pending;
  };
}
