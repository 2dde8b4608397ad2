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
  // Local-use NAT64 (RFC 8215): never a public address. The well-known 64:ff9b::/96 is judged by the IPv4 address it carries.
  ['64:ff9b:1::', 48],
  ['100::', 64],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/**
 * True for private, loopback, link-local, unspecified, multicast and reserved addresses. An
 * IPv6 address that carries an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64, 6to4,
 * Teredo) is judged by the IPv4 addresses it carries, since the packets reach those.
 */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const version = isIP(bare);
  if (version === 4) return blocked.check(bare, 'ipv4');
  if (version !== 6) return true;
  const carried = carriedIpv4(ipv6Groups(bare));
  if (carried.length > 0) return carried.some((ipv4) => blocked.check(ipv4, 'ipv4'));
  return blocked.check(bare, 'ipv6');
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail as two groups). */
function ipv6Groups(address: string): number[] {
  const parse = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [parseInt(group, 16)];
          const [a, b, c, d] = group.split('.').map(Number) as [number, number, number, number];
          return [(a << 8) | b, (c << 8) | d];
        });
  const [head = '', tail] = address.toLowerCase().split('::');
  if (tail === undefined) return parse(head);
  const [before, after] = [parse(head), parse(tail)];
  return [...before, ...new Array<number>(8 - before.length - after.length).fill(0), ...after];
}

/** The IPv4 addresses an IPv6 address carries (none for an ordinary one). */
function carriedIpv4(groups: number[]): string[] {
  const dotted = (high: number, low: number) => [high >> 8, high & 255, low >> 8, low & 255].join('.');
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [number, number, number, number, number, number, number, number];
  const zeroUpTo = (count: number) => groups.slice(0, count).every((group) => group === 0);
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, which also covers :: and ::1 as 0.0.0.0/8).
  if (zeroUpTo(5) && (g5 === 0xffff || g5 === 0)) return [dotted(g6, g7)];
  // 64:ff9b::a.b.c.d, the well-known NAT64 prefix.
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0) return [dotted(g6, g7)];
  // 2002:AABB:CCDD::/48, 6to4.
  if (g0 === 0x2002) return [dotted(g1, g2)];
  // 2001:0::/32, Teredo: the server's address, and the client's with its bits inverted.
  if (g0 === 0x2001 && g1 === 0) return [dotted(g2, g3), dotted(~g6 & 0xffff, ~g7 & 0xffff)];
  return [];
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
