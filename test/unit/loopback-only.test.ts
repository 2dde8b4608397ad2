import { expect } from 'chai';
import type { NextFunction, Request, Response } from 'express';
import { isLoopbackAddress, loopbackOnly } from '../../gateway/http/loopback-only.js';
import { ServiceError } from '../../runtime/service-error.js';

/** Runs the guard for a client at `remoteAddress`: true when it let the request through. */
function admits(remoteAddress: string | undefined): boolean {
  let passed = false;
  const req = { socket: { remoteAddress }, get: () => '127.0.0.1' } as unknown as Request;
  loopbackOnly('/metrics')(req, {} as Response, (() => (passed = true)) as NextFunction);
  return passed;
}

describe('loopbackOnly (local mode: /inspect and /metrics)', () => {
  it('knows loopback addresses however they are written', () => {
    for (const address of ['127.0.0.1', '127.8.9.10', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1', '::FFFF:127.0.0.2']) {
      expect(isLoopbackAddress(address), address).to.equal(true);
    }
    for (const address of ['192.0.2.2', '10.0.0.1', '::', '::2', 'fd00::2', 'fe80::1', '::ffff:10.0.0.1', '128.0.0.1', undefined]) {
      expect(isLoopbackAddress(address), String(address)).to.equal(false);
    }
  });

  it('lets clients of this machine through', () => {
    expect(admits('127.0.0.1')).to.equal(true);
    expect(admits('::1')).to.equal(true);
  });

  it('refuses any other client with a 403 saying to set API_KEYS, whatever its headers say', () => {
    let refused: unknown;
    try {
      admits('192.0.2.10');
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(ServiceError);
    expect((refused as ServiceError).status).to.equal(403);
    expect((refused as ServiceError).message).to.match(/set API_KEYS/);
  });
});
