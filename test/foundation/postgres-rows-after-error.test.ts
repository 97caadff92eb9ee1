// A query that fails while PostgreSQL streams its rows (an error at a later row, a statement timeout, a
// backend terminated mid-result) never reaches CommandComplete, which alone reset postgres.js 3.4.9's row
// index: the next query on that connection resolved with holes before its rows ([undefined, row]), so a
// lookup of one row read as "none" (the EST storm answered 401 for right keys). patches/postgres+3.4.9.patch
// resets the index at ReadyForQuery and when the connection closes (porsager/postgres#1119, #1181).
import postgres from 'postgres';
import t from 'tap';
import { createTestDatabase } from '../helpers/database.js';

t.test('a query failing mid-stream leaves no holes in the next query\'s rows on that connection', async (t) => {
  const db = await createTestDatabase({ empty: true });
  const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
  t.teardown(async () => {
    await sql.end({ timeout: 1 });
    await db.drop();
  });
  for (let round = 0; round < 3; round++) {
    // Three rows are sent before the fourth divides by zero.
    await t.rejects(sql`select i, 1 / (4 - i) as boom from generate_series(1, 10) i`, { code: '22012' }, `round ${round}: the query fails mid-stream`);
    const rows = await sql<{ x: number }[]>`select x from generate_series(1, 2) x`;
    t.same([...rows], [{ x: 1 }, { x: 2 }], 'the next query has its own rows, from index 0');
  }
});
