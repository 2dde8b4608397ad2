import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/** Address ranges a webhook may not reach unless private targets are allowed. */
const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['100::', 64],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/** True for private, loopback, link-local, unspecified, multicast and reserved addresses (IPv4-mapped IPv6 included). */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const version = isIP(bare);
  if (version === 4) return blocked.check(bare, 'ipv4');
  if (version !== 6) return true;
  const mapped = mappedIpv4(bare.toLowerCase());
  if (mapped) return blocked.check(mapped, 'ipv4');
  return blocked.check(bare, 'ipv6');
}

/** The IPv4 address inside `::ffff:a.b.c.d` or `::ffff:hhhh:hhhh`. */
function mappedIpv4(address: string): string | undefined {
  const dotted = /^(?:0{0,4}:){0,5}:?ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (dotted) return dotted[1];
  const hex = /^(?:0{0,4}:){0,5}:?ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(address);
  if (!hex) return undefined;
  const high = parseInt(hex[1]!, 16);
  const low = parseInt(hex[2]!, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join('.');
}

/** One resolved address of a target. */
export type ResolvedAddress = { address: string; family: 4 | 6 };

/** Why a target was refused. */
export class WebhookTargetError extends Error {
  override readonly name = 'WebhookTargetError';
}

/** What a target check allows. */
export type TargetPolicy = { allowHttp: boolean; allowPrivateTargets: boolean };

/** Checks a webhook URL's scheme (https unless allow_http) and returns the parsed URL. */
export function checkTargetUrl(raw: string, policy: TargetPolicy): URL {
  if (!URL.canParse(raw)) throw new WebhookTargetError('url must be an absolute URL.');
  const url = new URL(raw);
  if (url.protocol !== 'https:' && !(policy.allowHttp && url.protocol === 'http:')) {
    throw new WebhookTargetError(policy.allowHttp ? 'url must use http or https.' : 'url must use https.');
  }
  if (url.username || url.password) throw new WebhookTargetError('url must not contain credentials.');
  return url;
}

/**
 * Resolves the URL's host (every address) and refuses it when any address is private,
 * loopback or link-local, unless private targets are allowed.
 */
export async function resolveTarget(url: URL, policy: TargetPolicy): Promise<ResolvedAddress[]> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: ResolvedAddress[];
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) as 4 | 6 }];
  } else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })) as ResolvedAddress[];
    } catch (error) {
      throw new WebhookTargetError(`The host ${host} could not be resolved (${(error as NodeJS.ErrnoException).code ?? 'error'}).`);
    }
    if (addresses.length === 0) throw new WebhookTargetError(`The host ${host} has no address.`);
  }
  if (!policy.allowPrivateTargets) {
    const refused = addresses.find((entry) => isPrivateAddress(entry.address));
    if (refused) throw new WebhookTargetError(`url points to a private, loopback or link-local address (${refused.address}).`);
  }
  return addresses;
}
