// Forward-only migrations from sql/NNNN_verb_noun.sql, applied under an advisory lock and recorded.
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../log.js';
import type { Sql } from './client.js';

const FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;
// Any constant works; it only has to be the same in every process that migrates this database.
const LOCK_KEY = 7_346_201;

export interface Migration {
  version: string;
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir: string): Promise<Migration[]> {
  const files = (await fs.readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const m = FILE.exec(file);
    if (!m) throw new Error(`migration file name ${file} does not match NNNN_verb_noun.sql`);
    const text = await fs.readFile(path.join(dir, file), 'utf8');
    migrations.push({
      version: m[1] as string,
      name: m[2] as string,
      sql: text,
      checksum: createHash('sha256').update(text).digest('hex'),
    });
  }
  const seen = new Set<string>();
  for (const mig of migrations) {
    if (seen.has(mig.version)) throw new Error(`two migrations share version ${mig.version}`);
    seen.add(mig.version);
  }
  return migrations;
}

/**
 * Applies pending migrations, each in its own transaction that first takes a transaction-scoped
 * advisory lock. Concurrent callers (several instances starting at once) serialise on the lock and
 * re-check what is applied once they hold it, so each migration runs exactly once.
 */
export async function migrate(sql: Sql, dir: string, log: Logger): Promise<string[]> {
  const migrations = await readMigrations(dir);
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK_KEY})`;
    await tx`create table if not exists schema_migrations (
      version text primary key,
      name text not null,
      checksum text not null,
      applied_at timestamptz not null default now()
    )`;
  });
  const done: string[] = [];
  for (const mig of migrations) {
    const applied = await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${LOCK_KEY})`;
      const [row] = await tx<{ checksum: string }[]>`select checksum from schema_migrations where version = ${mig.version}`;
      if (row) {
        if (row.checksum !== mig.checksum) {
          throw new Error(`migration ${mig.version}_${mig.name} changed after it was applied; add a new migration instead`);
        }
        return false;
      }
      await tx.unsafe(mig.sql);
      await tx`insert into schema_migrations (version, name, checksum) values (${mig.version}, ${mig.name}, ${mig.checksum})`;
      return true;
    });
    if (applied) {
      log.info('migration applied', { version: mig.version, name: mig.name });
      done.push(`${mig.version}_${mig.name}`);
    }
  }
  return done;
}

/** Whether every migration on disk is applied: the readiness check reports it. */
export async function pendingMigrations(sql: Sql, dir: string): Promise<string[]> {
  const migrations = await readMigrations(dir);
  const rows = await sql<{ version: string }[]>`select version from schema_migrations`.catch(() => []);
  const applied = new Set(rows.map((r) => r.version));
  return migrations.filter((m) => !applied.has(m.version)).map((m) => `${m.version}_${m.name}`);
}
