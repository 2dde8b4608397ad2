import { expect } from 'chai';
import { Configuration } from 'openid-client';
import type { discovery } from 'openid-client';
import { createOidcConfigurationSource } from '../../runtime/accounts/oidc-client.js';
import { ServiceError } from '../../runtime/service-error.js';

const SETTINGS = { issuerUrl: 'https://idp.test', clientId: 'client', clientSecret: 'secret', allowInsecure: false };

/** A discovery that fails `failures` times, then succeeds; records its calls. */
function scriptedDiscovery(failures: number) {
  const calls: Array<Parameters<typeof discovery>> = [];
  const configuration = new Configuration({ issuer: 'https://idp.test' }, 'client', 'secret');
  const discover = (async (...args: Parameters<typeof discovery>) => {
    calls.push(args);
    if (calls.length <= failures) throw new TypeError('fetch failed');
    return configuration;
  }) as typeof discovery;
  return { discover, calls, configuration };
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('createOidcConfigurationSource', () => {
  it('does not contact the provider until the configuration is first needed', () => {
    const script = scriptedDiscovery(0);
    createOidcConfigurationSource(SETTINGS, script.discover);
    expect(script.calls).to.have.length(0);
  });

  it('discovers once and caches the configuration when it succeeds', async () => {
    const script = scriptedDiscovery(0);
    const source = createOidcConfigurationSource(SETTINGS, script.discover);
    expect(await source()).to.equal(script.configuration);
    expect(await source()).to.equal(script.configuration);
    expect(script.calls).to.have.length(1);
  });

  it('shares one discovery between concurrent callers', async () => {
    const script = scriptedDiscovery(0);
    const source = createOidcConfigurationSource(SETTINGS, script.discover);
    await Promise.all([source(), source(), source()]);
    expect(script.calls).to.have.length(1);
  });

  it('rejects with UPSTREAM_UNAVAILABLE and tries again later when the provider is down', async () => {
    const script = scriptedDiscovery(1);
    const source = createOidcConfigurationSource({ ...SETTINGS, retryAfterMs: 0 }, script.discover);
    const error = await failure(source());
    expect(error).to.be.instanceOf(ServiceError);
    expect((error as ServiceError).code).to.equal('UPSTREAM_UNAVAILABLE');
    expect((error as ServiceError).message).to.match(/idp\.test could not be reached for discovery: fetch failed/);
    expect(await source()).to.equal(script.configuration);
    expect(script.calls).to.have.length(2);
  });

  it('fails fast without asking again within the retry pause after a failure', async () => {
    const script = scriptedDiscovery(1);
    const source = createOidcConfigurationSource({ ...SETTINGS, retryAfterMs: 60_000 }, script.discover);
    await failure(source());
    expect(await failure(source())).to.be.instanceOf(ServiceError);
    expect(script.calls).to.have.length(1);
  });

  it('passes the client secret, or no client authentication when the secret is empty', async () => {
    const confidential = scriptedDiscovery(0);
    await createOidcConfigurationSource(SETTINGS, confidential.discover)();
    expect(confidential.calls[0]![2]).to.equal('secret');
    expect(confidential.calls[0]![3]).to.equal(undefined);
    const publicClient = scriptedDiscovery(0);
    await createOidcConfigurationSource({ ...SETTINGS, clientSecret: '' }, publicClient.discover)();
    expect(publicClient.calls[0]![2]).to.equal(undefined);
    expect(publicClient.calls[0]![3]).to.be.a('function');
  });

  it('allows http requests only when allow_insecure is set', async () => {
    const secure = scriptedDiscovery(0);
    await createOidcConfigurationSource(SETTINGS, secure.discover)();
    expect(secure.calls[0]![4]?.execute).to.deep.equal([]);
    const insecure = scriptedDiscovery(0);
    await createOidcConfigurationSource({ ...SETTINGS, allowInsecure: true }, insecure.discover)();
    expect(insecure.calls[0]![4]?.execute).to.have.length(1);
  });
});
