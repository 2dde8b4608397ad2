import { isIPv4, isIPv6 } from 'node:net';
import type { RequestHandler } from 'express';
import { ServiceError } from '../../runtime/service-error.js';

/** True for an address of this machine's loopback: 127.0.0.0/8, ::1, or 127.x mapped into IPv6. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  const ipv4 = address.toLowerCase().startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  if (isIPv4(ipv4)) return ipv4.startsWith('127.');
  // The URL parser writes an IPv6 address in its shortest form: ::1 however it was spelled.
  return isIPv6(address) && URL.canParse(`http://[${address}]/`) && new URL(`http://[${address}]/`).hostname === '[::1]';
}

/**
 * Serves only clients connected from this machine (the socket's address, never a header a
 * client could set). Guards what shows every user's data when no API keys are set.
 */
export function loopbackOnly(what: string): RequestHandler {
  return (req, _res, next) => {
    if (isLoopbackAddress(req.socket.remoteAddress)) return next();
    throw new ServiceError(
      'FORBIDDEN',
      `${what} answers only clients on this machine while no API keys are configured: set API_KEYS (auth.api_keys) to use it from the network.`,
    );
  };
}
