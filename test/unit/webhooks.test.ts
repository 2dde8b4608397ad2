import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { backoffMs } from '../../runtime/webhooks/webhook-dispatcher.js';
import { canonicalPayload, signedPayloadText, signWebhook, verifyWebhookSignature } from '../../runtime/webhooks/webhook-signature.js';
import { checkTargetUrl, isPrivateAddress, resolveTarget, WebhookTargetError } from '../../runtime/webhooks/webhook-targets.js';

describe('webhook signatures', () => {
  const secret = 'a-secret-of-16+chars';
  const payload = { event: 'agent.state_changed', timestamp: '2025-01-02T03:04:05.678Z', agent_id: 'a1', data: { previous_state: 'x', current_state: 'y', transition_reason: 'é "quoted"' } };

  it('signs exactly the JSON text of {event, timestamp, agent_id, data} in that order', () => {
    const canonical = canonicalPayload({ data: payload.data, agent_id: 'a1', timestamp: payload.timestamp, event: payload.event } as typeof payload);
    expect(canonical).to.equal(
      '{"event":"agent.state_changed","timestamp":"2025-01-02T03:04:05.678Z","agent_id":"a1","data":{"previous_state":"x","current_state":"y","transition_reason":"é \\"quoted\\""}}',
    );
    const body = JSON.parse(signedPayloadText(secret, payload)) as Record<string, unknown>;
    expect(Object.keys(body)).to.deep.equal(['event', 'timestamp', 'agent_id', 'data', 'signature']);
    const independent = `sha256=${createHmac('sha256', secret).update(Buffer.from(canonical, 'utf8')).digest('hex')}`;
    expect(body.signature).to.equal(independent);
    const { signature: _signature, ...rest } = body;
    expect(JSON.stringify(rest)).to.equal(canonical);
  });

  it('verifies in constant time and rejects altered text or signatures', () => {
    const signature = signWebhook(secret, 'body');
    expect(verifyWebhookSignature(secret, 'body', signature)).to.equal(true);
    expect(verifyWebhookSignature(secret, 'body!', signature)).to.equal(false);
    expect(verifyWebhookSignature('another-secret-xx', 'body', signature)).to.equal(false);
    expect(verifyWebhookSignature(secret, 'body', 'sha256=00')).to.equal(false);
  });
});

describe('webhook targets', () => {
  it('flags private, loopback, link-local and reserved addresses', () => {
    for (const address of ['127.0.0.1', '10.0.0.1', '172.16.5.4', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '[::1]', 'not-an-ip']) {
      expect(isPrivateAddress(address), address).to.equal(true);
    }
  });

  it('passes public addresses', () => {
    for (const address of ['93.184.215.14', '8.8.8.8', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(isPrivateAddress(address), address).to.equal(false);
    }
  });

  it('judges an IPv6 address that carries an IPv4 address (compatible, NAT64, 6to4, Teredo) by that IPv4 address', () => {
    const carryingPrivate = [
      '::7f00:1',
      '::127.0.0.1',
      '[::127.0.0.1]',
      '::a00:1',
      '0:0:0:0:0:0:7f00:1',
      '64:ff9b::7f00:1',
      '64:ff9b::10.0.0.1',
      '64:ff9b:1::1',
      '2002:7f00:1::',
      '2002:a9fe:a9fe::1',
      '2002:c0a8:101:1::1',
      // Teredo: the server 192.168.1.1, or the client 127.0.0.1 (its bits inverted: 80ff:fffe).
      '2001:0:c0a8:101::1',
      '2001:0:808:808::80ff:fffe',
    ];
    for (const address of carryingPrivate) expect(isPrivateAddress(address), address).to.equal(true);
    for (const address of ['::808:808', '64:ff9b::808:808', '2002:808:808::1', '2001:0:808:808::f7f7:f7f7']) {
      expect(isPrivateAddress(address), address).to.equal(false);
    }
  });

  it('refuses URLs whose IPv6 host carries a private IPv4 address unless private targets are allowed', async () => {
    for (const raw of ['http://[::7f00:1]/', 'http://[::127.0.0.1]/', 'http://[2002:7f00:1::]/', 'http://[64:ff9b::a9fe:a9fe]/']) {
      const url = checkTargetUrl(raw, { allowHttp: true, allowPrivateTargets: false });
      let refused: unknown;
      await resolveTarget(url, { allowHttp: true, allowPrivateTargets: false }).catch((error: unknown) => (refused = error));
      expect(refused, raw).to.be.instanceOf(Error);
      expect((refused as Error).message, raw).to.match(/private, loopback, link-local or reserved/);
      expect(await resolveTarget(url, { allowHttp: true, allowPrivateTargets: true }), raw).to.have.length(1);
    }
  });

  it('refuses an IPv6 address carrying a private IPv4 address whatever its spelling (mapped, translated, compatible, NAT64, 6to4, Teredo)', () => {
    const carryingPrivate = [
      // IPv4-mapped ::ffff:0:0/96.
      '::ffff:127.0.0.1',
      '0000:0000:0000:0000:0000:FFFF:7F00:0001',
      '::ffff:a9fe:a9fe',
      // IPv4-translated ::ffff:0:0:0/96 (RFC 6145), in both spellings, with leading zeros and a zone.
      '::ffff:0:7f00:1',
      '::ffff:0:127.0.0.1',
      '0:0:0:0:ffff::7f00:1',
      '::ffff:0:a9fe:a9fe',
      '::ffff:0:169.254.169.254',
      '0000:0000:0000:0000:ffff:0000:0a00:0001',
      '[::ffff:0:7f00:1]',
      '::ffff:0:7f00:1%eth0',
      // IPv4-compatible ::/96.
      '::a9fe:a9fe',
      '::192.168.1.1',
      // NAT64: the well-known prefix carrying the metadata address; the local-use /48 is never public.
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::0:0:0:7f00:1',
      '64:ff9b:1::a9fe:a9fe',
      '64:ff9b:1::808:808',
      // 6to4 and Teredo (server 10.0.0.1; client 169.254.169.254, its bits inverted: 5601:5601).
      '2002:a00:1::1',
      '2002:a9fe:a9fe:1::1',
      '2001:0:a00:1::1',
      '2001:0:808:808::5601:5601',
    ];
    for (const address of carryingPrivate) expect(isPrivateAddress(address), address).to.equal(true);
  });

  it('refuses the documentation, benchmarking and reserved blocks of the IANA special-purpose registries', () => {
    const reserved = [
      '192.0.2.1',
      '198.51.100.1',
      '203.0.113.1',
      '198.19.255.254',
      '192.0.0.170',
      '192.88.99.1',
      '240.0.0.1',
      '255.255.255.255',
      '2001:db8::1',
      '2001:2::1',
      '2001:10::1',
      '2001:20::1',
      '2001:1::1',
      '3fff::1',
      '5f00::1',
      '100::1',
      '100:0:0:1::1',
      'fec0::1',
      'ff02::1',
      // Outside the global unicast 2000::/3: reserved by the IETF.
      '4000::1',
      '::ffff:192.0.2.1',
      '::ffff:0:203.0.113.1',
    ];
    for (const address of reserved) expect(isPrivateAddress(address), address).to.equal(true);
  });

  it('accepts a public address in every spelling that carries an IPv4 address, and a public IPv6 address', () => {
    const carryingPublic = [
      '::ffff:808:808',
      '::ffff:0:808:808',
      '::ffff:0:8.8.8.8',
      '0:0:0:0:ffff::808:808',
      '::8.8.8.8',
      '64:ff9b::8.8.8.8',
      '2002:808:808::1',
      '2001:0:808:808::f7f7:f7f7',
      '2001:4860:4860::8888',
      '2001:4860:4860:0000:0000:0000:0000:8888',
      '[2001:4860:4860::8888]',
    ];
    for (const address of carryingPublic) expect(isPrivateAddress(address), address).to.equal(false);
  });

  it('refuses URLs on a reserved or IPv4-translated host, naming the block, unless private targets are allowed', async () => {
    const refusedHosts = {
      'https://[::ffff:0:7f00:1]/hook': /Loopback/,
      'https://[::ffff:0:a9fe:a9fe]/latest': /Link Local/,
      'https://192.0.2.1/hook': /Documentation \(TEST-NET-1\)/,
      'https://[2001:db8::1]/hook': /Documentation/,
    };
    for (const [raw, block] of Object.entries(refusedHosts)) {
      const url = checkTargetUrl(raw, { allowHttp: false, allowPrivateTargets: false });
      let refused: unknown;
      await resolveTarget(url, { allowHttp: false, allowPrivateTargets: false }).catch((error: unknown) => (refused = error));
      expect(refused, raw).to.be.instanceOf(WebhookTargetError);
      expect((refused as Error).message, raw).to.match(/private, loopback, link-local or reserved/).and.to.match(block);
      expect(await resolveTarget(url, { allowHttp: false, allowPrivateTargets: true }), raw).to.have.length(1);
    }
    expect(await resolveTarget(new URL('https://[::ffff:0:808:808]/'), { allowHttp: false, allowPrivateTargets: false })).to.deep.equal([{ address: '::ffff:0:808:808', family: 6 }]);
  });

  it('checks the scheme and the resolved addresses', async () => {
    expect(() => checkTargetUrl('http://93.184.215.14/', { allowHttp: false, allowPrivateTargets: false })).to.throw(/https/);
    expect(checkTargetUrl('http://93.184.215.14/', { allowHttp: true, allowPrivateTargets: false }).host).to.equal('93.184.215.14');
    expect(() => checkTargetUrl('ftp://x/', { allowHttp: true, allowPrivateTargets: false })).to.throw();
    let refused: unknown;
    await resolveTarget(new URL('https://localhost/'), { allowHttp: false, allowPrivateTargets: false }).catch((error: unknown) => (refused = error));
    expect(refused).to.be.instanceOf(Error);
    expect(await resolveTarget(new URL('https://127.0.0.1/'), { allowHttp: false, allowPrivateTargets: true })).to.deep.equal([{ address: '127.0.0.1', family: 4 }]);
  });

  it('backs off exponentially up to the maximum', () => {
    const settings = { initialBackoffMs: 1000, maxBackoffMs: 5000 };
    expect([1, 2, 3, 4, 5].map((attempts) => backoffMs(attempts, settings))).to.deep.equal([1000, 2000, 4000, 5000, 5000]);
  });
});
