import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import t from 'tap';
import { migrate, readMigrations } from '../../src/db/migrate.js';
import { migrationsDir, projectRoot } from '../../src/paths.js';
import { createTestDatabase } from '../helpers/database.js';
import { testLogger } from '../helpers/service.js';

async function schemaOf(sql: postgres.Sql) {
  return sql`
    select table_name, column_name, data_type, is_nullable, column_default
    from information_schema.columns where table_schema = 'public'
    order by table_name, column_name`;
}

t.test('migrations applied twice leave the same schema and are recorded once', async (t) => {
  const db = await createTestDatabase({ empty: true });
  const sql = postgres(db.url, { max: 2, onnotice: () => undefined });
  t.teardown(async () => {
    await sql.end();
    await db.drop();
  });
  const first = await migrate(sql as never, migrationsDir, testLogger());
  const files = await readMigrations(migrationsDir);
  t.equal(first.length, files.length, 'every migration applied on an empty database');
  const before = await schemaOf(sql);
  const second = await migrate(sql as never, migrationsDir, testLogger());
  t.same(second, [], 'nothing applied the second time');
  t.same(await schemaOf(sql), before);
  const [{ count }] = await sql<[{ count: number }]>`select count(*)::int as count from schema_migrations`;
  t.equal(count, files.length);
});

t.test('an applied migration that changed on disk is refused', async (t) => {
  const db = await createTestDatabase({ empty: true });
  const sql = postgres(db.url, { max: 2, onnotice: () => undefined });
  t.teardown(async () => {
    await sql.end();
    await db.drop();
  });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mig-'));
  await writeFile(path.join(dir, '0001_create_thing.sql'), 'create table thing (id int);');
  await migrate(sql as never, dir, testLogger());
  await writeFile(path.join(dir, '0001_create_thing.sql'), 'create table thing (id bigint);');
  await t.rejects(migrate(sql as never, dir, testLogger()), /changed after it was applied/);
});

t.test('two processes migrating the same database at once do not collide', async (t) => {
  const db = await createTestDatabase({ empty: true });
  t.teardown(() => db.drop());
  const run = () => new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, [path.join(projectRoot, 'dist/src/db/migrate-cli.js')], {
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, SVC_LOG_LEVEL: 'info' },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => resolve({ code, out }));
  });
  const [a, b] = await Promise.all([run(), run()]);
  t.equal(a.code, 0, a.out);
  t.equal(b.code, 0, b.out);
  const sql = postgres(db.url, { max: 1 });
  t.teardown(() => sql.end());
  const files = await readMigrations(migrationsDir);
  const rows = await sql`select version from schema_migrations order by version`;
  t.same(rows.map((r) => r.version), files.map((f) => f.version), 'each migration recorded exactly once');
  const applied = (a.out.match(/"migration applied"/g) ?? []).length + (b.out.match(/"migration applied"/g) ?? []).length;
  t.equal(applied, files.length, 'each migration ran in exactly one of the two processes');
});
