import { parseIpAddress, type IpAddress } from './ip-address.js';

/** A block of addresses that is not on the public Internet, and what it is for. */
export type SpecialPurposeBlock = { prefix: string; name: string };

/**
 * The IPv4 blocks that are not globally reachable. Source: the IANA IPv4 Special-Purpose Address
 * Registry (https://www.iana.org/assignments/iana-ipv4-special-registry, last updated 2025-10-09):
 * every block whose "Globally Reachable" is False, and the terminated 192.88.99.0/24. The
 * registry's globally reachable blocks are left out, but those inside a listed block
 * (192.0.0.9/32 and 192.0.0.10/32, anycast for PCP and TURN) are refused with it: never a
 * webhook receiver. Multicast is not in that registry and is added from RFC 5771.
 */
export const IPV4_SPECIAL_PURPOSE_BLOCKS: readonly SpecialPurposeBlock[] = [
  { prefix: '0.0.0.0/8', name: '"This network"' },
  { prefix: '0.0.0.0/32', name: '"This host on this network"' },
  { prefix: '10.0.0.0/8', name: 'Private-Use' },
  { prefix: '100.64.0.0/10', name: 'Shared Address Space' },
  { prefix: '127.0.0.0/8', name: 'Loopback' },
  { prefix: '169.254.0.0/16', name: 'Link Local' },
  { prefix: '172.16.0.0/12', name: 'Private-Use' },
  { prefix: '192.0.0.0/24', name: 'IETF Protocol Assignments' },
  { prefix: '192.0.0.0/29', name: 'IPv4 Service Continuity Prefix' },
  { prefix: '192.0.0.8/32', name: 'IPv4 dummy address' },
  { prefix: '192.0.0.170/32', name: 'NAT64/DNS64 Discovery' },
  { prefix: '192.0.0.171/32', name: 'NAT64/DNS64 Discovery' },
  { prefix: '192.0.2.0/24', name: 'Documentation (TEST-NET-1)' },
  { prefix: '192.88.99.0/24', name: 'Deprecated (6to4 Relay Anycast)' },
  { prefix: '192.88.99.2/32', name: '6a44-relay anycast address' },
  { prefix: '192.168.0.0/16', name: 'Private-Use' },
  { prefix: '198.18.0.0/15', name: 'Benchmarking' },
  { prefix: '198.51.100.0/24', name: 'Documentation (TEST-NET-2)' },
  { prefix: '203.0.113.0/24', name: 'Documentation (TEST-NET-3)' },
  { prefix: '224.0.0.0/4', name: 'Multicast' },
  { prefix: '240.0.0.0/4', name: 'Reserved' },
  { prefix: '255.255.255.255/32', name: 'Limited Broadcast' },
];

/**
 * The IPv6 blocks that are not globally reachable. Source: the IANA IPv6 Special-Purpose Address
 * Registry (https://www.iana.org/assignments/iana-ipv6-special-registry, last updated 2025-10-09):
 * every block whose "Globally Reachable" is False, and the terminated 2001:10::/28. Its globally
 * reachable blocks inside 2001::/23 (2001:1::1/128 to 2001:30::/28: anycast services, AMT,
 * AS112, ORCHIDv2, drone tags) are refused with it: never a webhook receiver. The registry's
 * IPv4-mapped ::ffff:0:0/96 is left out: the blocks that carry an IPv4 address (see
 * `carriedIpv4`) are judged by that address, before this list is consulted. Added from the IANA
 * IPv6 Address Space registry: everything outside the global unicast 2000::/3 (reserved by the
 * IETF, site-local, multicast).
 */
export const IPV6_SPECIAL_PURPOSE_BLOCKS: readonly SpecialPurposeBlock[] = [
  { prefix: '::1/128', name: 'Loopback Address' },
  { prefix: '::/128', name: 'Unspecified Address' },
  // Local-use NAT64 (RFC 8215): where the IPv4 address sits depends on the operator's prefix length.
  { prefix: '64:ff9b:1::/48', name: 'IPv4-IPv6 Translat.' },
  { prefix: '100::/64', name: 'Discard-Only Address Block' },
  { prefix: '100:0:0:1::/64', name: 'Dummy IPv6 Prefix' },
  { prefix: '2001::/23', name: 'IETF Protocol Assignments' },
  { prefix: '2001:2::/48', name: 'Benchmarking' },
  { prefix: '2001:10::/28', name: 'Deprecated (previously ORCHID)' },
  { prefix: '2001:db8::/32', name: 'Documentation' },
  { prefix: '3fff::/20', name: 'Documentation' },
  { prefix: '5f00::/16', name: 'Segment Routing (SRv6) SIDs' },
  { prefix: 'fc00::/7', name: 'Unique-Local' },
  { prefix: 'fe80::/10', name: 'Link-Local Unicast' },
  { prefix: 'fec0::/10', name: 'Deprecated site-local' },
  { prefix: 'ff00::/8', name: 'Multicast' },
  { prefix: '::/3', name: 'Reserved by IETF (outside global unicast 2000::/3)' },
  { prefix: '4000::/2', name: 'Reserved by IETF (outside global unicast 2000::/3)' },
  { prefix: '8000::/1', name: 'Reserved by IETF (outside global unicast 2000::/3)' },
];

/** A listed block as numbers: the bits an address must share with `network`. */
type CompiledBlock = SpecialPurposeBlock & { network: bigint; length: number };

const compiled = { 4: compile(IPV4_SPECIAL_PURPOSE_BLOCKS, 4), 6: compile(IPV6_SPECIAL_PURPOSE_BLOCKS, 6) };

/**
 * The most specific listed block of its family that holds the address; undefined when the
 * address is in none (globally reachable). It looks at the address itself only: an IPv6 address
 * that carries an IPv4 one is the caller's to unwrap.
 */
export function specialPurposeBlockOf(address: IpAddress): SpecialPurposeBlock | undefined {
  const width = address.family === 4 ? 32 : 128;
  let found: CompiledBlock | undefined;
  for (const block of compiled[address.family]) {
    const shift = BigInt(width - block.length);
    if (address.value >> shift === block.network >> shift && (!found || block.length > found.length)) found = block;
  }
  return found && { prefix: found.prefix, name: found.name };
}

/** Parses the list once, at start-up: a malformed prefix is a programming error. */
function compile(blocks: readonly SpecialPurposeBlock[], family: 4 | 6): CompiledBlock[] {
  const width = family === 4 ? 32 : 128;
  return blocks.map((block) => {
    const [network = '', lengthText = ''] = block.prefix.split('/');
    const address = parseIpAddress(network);
    const length = /^\d+$/.test(lengthText) ? Number(lengthText) : NaN;
    if (address?.family !== family || !(length >= 0 && length <= width) || address.value & ((1n << BigInt(width - length)) - 1n)) {
      throw new Error(`Bad special-purpose block ${block.prefix}`);
    }
    return { ...block, network: address.value, length };
  });
}
