import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { carriedIpv4, formatIpv4, parseIpAddress } from './ip-address.js';
import { specialPurposeBlockOf } from './special-purpose-blocks.js';

/**
 * Why an address is no webhook target: the special-purpose block it is in (private, loopback,
 * link-local, documentation, reserved…), as `<block name> <prefix>`; undefined for a public
 * address. An IPv6 address that carries IPv4 addresses (mapped, translated, compatible, NAT64,
 * 6to4, Teredo) is judged by those alone, since its packets reach them. Anything that is not an
 * IP address is refused.
 */
function refusedAddressReason(address: string): string | undefined {
  const parsed = parseIpAddress(address);
  if (!parsed) return 'not an IP address';
  const carried = carriedIpv4(parsed);
  for (const ipv4 of carried) {
    const block = specialPurposeBlockOf({ family: 4, value: ipv4 });
    if (block) return `carries ${formatIpv4(ipv4)}: ${block.name} ${block.prefix}`;
  }
  if (carried.length > 0) return undefined;
  const block = specialPurposeBlockOf(parsed);
  return block && `${block.name} ${block.prefix}`;
}

/** True for an address a webhook may not reach unless private targets are allowed (see `refusedAddressReason`). */
export function isPrivateAddress(address: string): boolean {
  return refusedAddressReason(address) !== undefined;
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
 * loopback, link-local or reserved, unless private targets are allowed.
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
    for (const { address } of addresses) {
      const reason = refusedAddressReason(address);
      if (reason) throw new WebhookTargetError(`url points to a private, loopback, link-local or reserved address (${address}, ${reason}).`);
    }
  }
  return addresses;
}
