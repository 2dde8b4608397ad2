import { isIP } from 'node:net';

/** An IP address as its numeric value: 32 bits for IPv4, 128 for IPv6. */
export type IpAddress = { family: 4 | 6; value: bigint };

/**
 * Parses an IP address in any valid spelling (brackets, a zone, `::`, leading zeros, a dotted
 * IPv4 tail); undefined for anything that is not one.
 */
export function parseIpAddress(text: string): IpAddress | undefined {
  const bare = text.replace(/^\[(.*)\]$/s, '$1').replace(/%.*$/s, '');
  const family = isIP(bare);
  if (family === 4) return { family: 4, value: ipv4Value(bare) };
  if (family === 6) return { family: 6, value: ipv6Groups(bare).reduce((value, group) => (value << 16n) | BigInt(group), 0n) };
  return undefined;
}

/** An IPv4 address's value in dotted-quad form. */
export function formatIpv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => (value >> shift) & 0xffn).join('.');
}

/**
 * The IPv4 addresses an IPv6 address carries, which are where its packets end up: IPv4-mapped
 * `::ffff:0:0/96` and IPv4-compatible `::/96` (RFC 4291), IPv4-translated `::ffff:0:0:0/96`
 * (RFC 6145), the well-known NAT64 prefix `64:ff9b::/96` (RFC 6052), 6to4 `2002::/16` (RFC 3056)
 * and Teredo `2001::/32` (RFC 4380: the server, and the client with its bits inverted). None
 * for any other address.
 */
export function carriedIpv4(address: IpAddress): bigint[] {
  if (address.family !== 6) return [];
  const { value } = address;
  const bits = (from: number, count: number) => (value >> BigInt(128 - from - count)) & ((1n << BigInt(count)) - 1n);
  const low32 = bits(96, 32);
  const high96 = value >> 32n;
  // :: and ::1 are the unspecified and loopback addresses, not IPv4-compatible ones.
  if (high96 === 0n) return value > 1n ? [low32] : [];
  if (high96 === 0xffffn || high96 === 0xffff0000n || high96 === 0x64ff9b0000000000000000n) return [low32];
  if (bits(0, 16) === 0x2002n) return [bits(16, 32)];
  if (bits(0, 32) === 0x20010000n) return [bits(32, 32), low32 ^ 0xffffffffn];
  return [];
}

/** A valid dotted-quad IPv4 address's value. */
function ipv4Value(address: string): bigint {
  return address.split('.').reduce((value, octet) => (value << 8n) | BigInt(octet), 0n);
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail as two groups). */
function ipv6Groups(address: string): number[] {
  const parse = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [parseInt(group, 16)];
          const ipv4 = Number(ipv4Value(group));
          return [ipv4 >>> 16, ipv4 & 0xffff];
        });
  const [head = '', tail] = address.split('::');
  if (tail === undefined) return parse(head);
  const [before, after] = [parse(head), parse(tail)];
  return [...before, ...new Array<number>(8 - before.length - after.length).fill(0), ...after];
}
