import { expect } from 'chai';
import { ConfigError } from '../../config/load-config.js';
import { createApiKeyGuard } from '../../gateway/http/api-keys.js';

describe('createApiKeyGuard', () => {
  it('refuses a metrics token that is also an API key, or that has a space', () => {
    expect(() => createApiKeyGuard({ apiKeys: 'admin-key, alice-key:alice', metricsToken: 'alice-key' })).to.throw(ConfigError, /metrics\.token .* also an entry of auth\.api_keys/);
    expect(() => createApiKeyGuard({ apiKeys: 'admin-key', metricsToken: 'two words' })).to.throw(ConfigError, /must not contain spaces/);
  });

  it('reads no metrics token in local mode (no API keys)', () => {
    const guard = createApiKeyGuard({ apiKeys: '', metricsToken: 'two words' });
    expect(guard.enabled).to.equal(false);
  });

  it('counts only API keys, not the metrics token, to leave local mode', () => {
    expect(createApiKeyGuard({ apiKeys: 'admin-key', metricsToken: 'prometheus-token' }).enabled).to.equal(true);
    expect(createApiKeyGuard({ apiKeys: ' , ', metricsToken: 'prometheus-token' }).enabled).to.equal(false);
  });
});
