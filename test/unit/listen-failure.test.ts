import { expect } from 'chai';
import { cannotListenLine } from '../../gateway/server/listen-failure.js';

function systemError(code: string, syscall: string, more: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(`${syscall} ${code}`), { code, syscall, ...more });
}

describe('the line of a start that cannot listen', () => {
  const where = { host: '0.0.0.0', port: 80 };

  it('says a port below 1024 needs the right to it (root here may bind any, so this is told apart from the process tests)', () => {
    expect(cannotListenLine(systemError('EACCES', 'listen'), where)).to.equal(
      'cannot listen on 0.0.0.0:80: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE). Set APP_PORT (or PORT) to 1024 or above, or put a reverse proxy in front.',
    );
  });

  it('says a host name that resolves to nothing, naming APP_HOST', () => {
    const line = cannotListenLine(systemError('ENOTFOUND', 'getaddrinfo', { hostname: 'no-such-host' }), { host: 'no-such-host', port: 1111 });
    expect(line).to.include('no-such-host resolves to no address').and.include('APP_HOST');
  });

  it('leaves every other failure to the start-up failure line', () => {
    expect(cannotListenLine(new Error('something else'), where)).to.equal(undefined);
    expect(cannotListenLine(systemError('ECONNREFUSED', 'connect'), where)).to.equal(undefined);
    expect(cannotListenLine(systemError('ENOTFOUND', 'getaddrinfo', { hostname: 'db.internal' }), where)).to.equal(undefined);
  });
});
