/**
 * The exit code of a start that cannot listen (sysexits.h EX_TEMPFAIL): a supervisor's restart
 * may succeed once the port is free, where a configuration error (78, EX_CONFIG) never would.
 */
export const CANNOT_LISTEN_EXIT_CODE = 75;

/** What the operating system says when a server cannot listen (Node's system error). */
type SystemError = Error & { code?: unknown; syscall?: unknown; address?: unknown; port?: unknown; hostname?: unknown };

/**
 * The one line that says why the service cannot listen on `host`:`port` and what to change, or
 * undefined when `error` is not a failure to listen (a port taken, an address not of this
 * machine, a port below 1024 without the right to it, a host name that resolves to nothing).
 */
export function cannotListenLine(error: unknown, where: { host: string; port: number }): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, syscall, hostname } = error as SystemError;
  const address = `${where.host}:${where.port}`;
  if (syscall === 'listen' || syscall === 'bind') {
    if (code === 'EADDRINUSE') {
      return `cannot listen on ${address}: the address is already in use (another process listens there). Stop that process, or set APP_PORT (or PORT) to a free port.`;
    }
    if (code === 'EADDRNOTAVAIL') {
      return `cannot listen on ${address}: ${where.host} is not an address of this machine. Set APP_HOST to one of its addresses (0.0.0.0 for all of them, 127.0.0.1 for this machine only).`;
    }
    if (code === 'EACCES' || code === 'EPERM') {
      return `cannot listen on ${address}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE). Set APP_PORT (or PORT) to 1024 or above, or put a reverse proxy in front.`;
    }
  }
  if ((code === 'ENOTFOUND' || code === 'EAI_AGAIN') && hostname === where.host) {
    return `cannot listen on ${address}: the host name ${where.host} resolves to no address. Set APP_HOST to an address of this machine (0.0.0.0 for all of them).`;
  }
  return undefined;
}
