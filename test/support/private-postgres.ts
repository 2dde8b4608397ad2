import { execFile, spawnSync } from 'node:child_process';
import { accessSync, chownSync, constants, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../scripts/bench/child-process.js';

const run = promisify(execFile);

/** Where the PostgreSQL 15 server binaries live (Debian and Ubuntu packages). */
const PG_BIN = '/usr/lib/postgresql/15/bin';

/** How `stop` shuts the server down: `fast` ends sessions cleanly, `immediate` is a crash (recovery at the next start). */
export type StopMode = 'fast' | 'immediate';

/**
 * Why a private server cannot run here (no PostgreSQL 15 binaries, or running as root
 * without `runuser` and a `postgres` user), or null when it can.
 */
export function privatePostgresUnavailable(): string | null {
  try {
    accessSync(join(PG_BIN, 'initdb'), constants.X_OK);
  } catch {
    return `no PostgreSQL 15 server binaries in ${PG_BIN}`;
  }
  if (!isRoot()) return null;
  // PostgreSQL refuses to run as root: the binaries run as the postgres OS user.
  const probe = spawnSync('runuser', ['-u', 'postgres', '--', 'true']);
  return probe.status === 0 ? null : 'running as root, and `runuser -u postgres` is not possible here';
}

/**
 * A PostgreSQL server of the test's own (initdb into a fresh temp folder, trust auth, on
 * 127.0.0.1 and a free port), so a test can stop, crash and restart it without touching the
 * machine's shared server. Durability settings are PostgreSQL's defaults.
 */
export class PrivatePostgres {
  private running = false;
  private readonly removeOnExit = () => this.destroySync();

  private constructor(
    private readonly folder: string,
    readonly port: number,
  ) {
    process.once('exit', this.removeOnExit);
  }

  /** Creates the cluster (not started); throws with `privatePostgresUnavailable()`'s reason when it cannot. */
  static async create(): Promise<PrivatePostgres> {
    const reason = privatePostgresUnavailable();
    if (reason) throw new Error(`a private PostgreSQL cannot run: ${reason}`);
    const folder = mkdtempSync(join(tmpdir(), 'svc-private-pg-'));
    if (isRoot()) chownSync(folder, postgresUid(), postgresGid());
    const server = new PrivatePostgres(folder, await freePort());
    try {
      // --no-sync only skips flushing the fresh cluster files: the server itself keeps fsync on.
      await server.pg('initdb', ['-D', server.dataDir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync']);
      const settings = [
        "listen_addresses = '127.0.0.1'",
        `port = ${server.port}`,
        // The socket goes in the private folder, away from the shared server's.
        `unix_socket_directories = '${folder}'`,
        'shared_buffers = 16MB',
        'max_connections = 60',
      ];
      writeFileSync(join(server.dataDir, 'postgresql.auto.conf'), `${settings.join('\n')}\n`);
      return server;
    } catch (error) {
      server.destroySync();
      throw error;
    }
  }

  /** The connection string of the `postgres` database, as superuser `postgres`. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private get dataDir(): string {
    return join(this.folder, 'data');
  }

  /** Starts the server and resolves once it accepts connections. */
  async start(): Promise<void> {
    await this.pg('pg_ctl', ['start', '-D', this.dataDir, '-l', join(this.folder, 'server.log'), '-w', '-t', '30']);
    this.running = true;
  }

  /** Stops the server and resolves once it is down. */
  async stop(options: { mode: StopMode } = { mode: 'fast' }): Promise<void> {
    await this.pg('pg_ctl', ['stop', '-D', this.dataDir, '-m', options.mode, '-w', '-t', '30']);
    this.running = false;
  }

  /** Stops the server (fast unless told otherwise) and starts it again. */
  async restart(options: { mode: StopMode } = { mode: 'fast' }): Promise<void> {
    await this.stop(options);
    await this.start();
  }

  /** Stops the server if it runs and removes its folder. */
  async destroy(): Promise<void> {
    if (this.running) await this.stop({ mode: 'immediate' });
    this.destroySync();
  }

  /** At process exit too: a failed test must not leave a server behind. */
  private destroySync(): void {
    process.off('exit', this.removeOnExit);
    if (this.running) {
      spawnSync(...command('pg_ctl', ['stop', '-D', this.dataDir, '-m', 'immediate', '-w']));
      this.running = false;
    }
    rmSync(this.folder, { recursive: true, force: true });
  }

  private async pg(binary: string, args: string[]): Promise<void> {
    try {
      await run(...command(binary, args));
    } catch (error) {
      const { stderr, stdout } = error as { stderr?: string; stdout?: string };
      throw new Error(`${binary} ${args[0]} failed: ${(stderr || stdout || String(error)).trim()}`);
    }
  }
}

/** The program and arguments that run a server binary, as the postgres OS user when we are root. */
function command(binary: string, args: string[]): [string, string[]] {
  const path = join(PG_BIN, binary);
  return isRoot() ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
}

function isRoot(): boolean {
  return process.getuid?.() === 0;
}

function postgresUid(): number {
  return Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
}

function postgresGid(): number {
  return Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
}
