import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../scripts/bench/child-process.js';

/** Debian's PgBouncer (`apt-get install -y pgbouncer`; 1.18 on Debian 12, without protocol-level prepared statements). */
export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';

/** What a test's PgBouncer pools: one database of a PostgreSQL server, as the server's user `postgres`. */
export type PgBouncerOptions = {
  /** Host and port of the PostgreSQL server. */
  server: { host: string; port: number };
  /** The server's database, served under the same name. */
  database: string;
  /** Server connections per database and user (`default_pool_size`). */
  poolSize: number;
};

/**
 * A PgBouncer of the test's own in transaction pooling mode (config in a temp folder, trust
 * authentication, 127.0.0.1 and a free port), in front of one database. Throws, saying how to
 * install it, when the binary is missing: a test that needs it fails rather than skips.
 */
export class PgBouncer {
  private exited: Promise<void>;
  private readonly removeOnExit = () => this.destroySync();

  private constructor(
    private readonly child: ChildProcess,
    private readonly folder: string,
    readonly port: number,
    private readonly database: string,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    process.once('exit', this.removeOnExit);
  }

  static async start(options: PgBouncerOptions): Promise<PgBouncer> {
    try {
      accessSync(PGBOUNCER_BINARY, constants.X_OK);
    } catch {
      throw new Error(`PgBouncer is not installed (${PGBOUNCER_BINARY} is missing): install Debian's package with apt-get install -y pgbouncer, as .ci/run does`);
    }
    const folder = mkdtempSync(join(tmpdir(), 'svc-pgbouncer-'));
    // PgBouncer refuses to run as root; started as root it becomes `user`, who must still read its files.
    chmodSync(folder, 0o755);
    const port = await freePort();
    const usersFile = join(folder, 'users.txt');
    writeFileSync(usersFile, '"postgres" ""\n', { mode: 0o644 });
    const settings = [
      '[databases]',
      `${options.database} = host=${options.server.host} port=${options.server.port} dbname=${options.database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${usersFile}`,
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize}`,
      'max_client_conn = 200',
      ...(process.getuid?.() === 0 ? ['user = postgres'] : []),
    ];
    const configFile = join(folder, 'pgbouncer.ini');
    writeFileSync(configFile, `${settings.join('\n')}\n`, { mode: 0o644 });
    const child = spawn(PGBOUNCER_BINARY, [configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    const bouncer = new PgBouncer(child, folder, port, options.database);
    try {
      await untilListening(child);
      return bouncer;
    } catch (error) {
      await bouncer.stop();
      throw error;
    }
  }

  /** The connection string of the pooled database through PgBouncer. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${this.database}`;
  }

  /** Stops PgBouncer (its immediate shutdown) and removes its folder. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
    this.destroySync();
  }

  /** At process exit too: a failed test must not leave a PgBouncer behind. */
  private destroySync(): void {
    process.off('exit', this.removeOnExit);
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    rmSync(this.folder, { recursive: true, force: true });
  }
}

/** Resolves at PgBouncer's "process up" log line; rejects with what it wrote when it exits first. */
function untilListening(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    const read = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (output.includes('process up')) resolve();
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', (code, signal) => reject(new Error(`pgbouncer exited (${signal ?? `code ${code}`}) before it listened: ${output.trim()}`)));
    child.once('error', reject);
  });
}
