// A fresh database with the service's migrations applied, for tests of one module against real
// PostgreSQL without starting the whole service; dropped when the test ends.
import postgres from 'postgres';
import type { Test } from 'tap';
import { migrate } from '../../src/db/migrate.js';
import { migrationsDir } from '../../src/paths.js';
import { createTestDatabase } from './database.js';
import { testLogger } from './service.js';

/** `dir`: another migrations directory (a test of an upgrade starts from the migrations up to a version). */
export async function migratedDatabase(t: Test, dir = migrationsDir): Promise<{ url: string; sql: postgres.Sql }> {
  // The service's own migrations come from the template; another directory starts from nothing.
  const db = await createTestDatabase({ empty: dir !== migrationsDir });
  const sql = postgres(db.url, { max: 2, onnotice: () => undefined });
  t.teardown(async () => {
    await sql.end();
    await db.drop();
  });
  await migrate(sql as never, dir, testLogger());
  return { url: db.url, sql };
}
