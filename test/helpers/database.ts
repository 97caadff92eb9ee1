// A fresh database per test file on the server DATABASE_URL points at (test/run.mjs guarantees one).
//
// Most tests want the service's schema, and applying ~50 migrations one transaction at a time costs a
// second or more per database (many seconds on a loaded machine), hundreds of times per run. So a
// migrated database is copied from a template (CREATE DATABASE ... TEMPLATE, a file copy) built once per
// server for the migrations on disk; tests of migrating itself ask for an empty one.
import { createHash, randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { migrate, readMigrations } from '../../src/db/migrate.js';
import { createLogger } from '../../src/log.js';
import { migrationsDir } from '../../src/paths.js';
import { scanDatabase } from './secret-scan.js';

export function adminUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL is not set: run the tests through `npm test`');
  return url;
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

// Any constant: only processes building the template take it.
const TEMPLATE_LOCK = 7_346_202;
let templateName: Promise<string> | undefined;

/** The template's name names its migrations, so a changed or added migration builds a new one. */
async function migratedTemplate(admin: postgres.Sql): Promise<string> {
  const migrations = await readMigrations(migrationsDir);
  const digest = createHash('sha256');
  for (const m of migrations) digest.update(`${m.version}\n${m.name}\n${m.checksum}\n`);
  const name = `svc_template_${digest.digest('hex').slice(0, 16)}`;
  const exists = async () => (await admin`select 1 from pg_database where datname = ${name}`).length > 0;
  if (await exists()) return name;
  // Test files start in parallel: one builds, the others wait on the lock and then find it.
  await admin`select pg_advisory_lock(${TEMPLATE_LOCK})`;
  try {
    if (await exists()) return name;
    const building = `${name}_building_${randomBytes(3).toString('hex')}`;
    await admin.unsafe(`create database ${building}`);
    const sql = postgres(withDatabase(adminUrl(), building), { max: 1, onnotice: () => undefined });
    try {
      await migrate(sql as never, migrationsDir, createLogger('silent'));
    } finally {
      await sql.end();
    }
    // The rename makes it visible whole: a template is never seen half migrated.
    await admin.unsafe(`alter database ${building} rename to ${name}`);
    return name;
  } finally {
    await admin`select pg_advisory_unlock(${TEMPLATE_LOCK})`;
  }
}

/** A new database: migrated (copied from the template) unless `empty` is asked for. */
export async function createTestDatabase(options: { empty?: boolean } = {}): Promise<TestDatabase> {
  const name = `test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => undefined });
  try {
    if (options.empty) {
      await admin.unsafe(`create database ${name}`);
    } else {
      try {
        templateName ??= migratedTemplate(admin);
        await admin.unsafe(`create database ${name} template ${await templateName}`);
      } catch (err) {
        // The template went away (test/run.mjs drops old ones at the start of a run): build it again, once.
        if ((err as { code?: string }).code !== '3D000') throw err;
        templateName = migratedTemplate(admin);
        await admin.unsafe(`create database ${name} template ${await templateName}`);
      }
    }
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(adminUrl(), name),
    name,
    async drop() {
      await scanDatabase(withDatabase(adminUrl(), name));
      const a = postgres(adminUrl(), { max: 1, onnotice: () => undefined });
      try {
        await a.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await a.end();
      }
    },
  };
}
