// A statement scope (src/db/statement-scope.ts) against a real PostgreSQL: abandoning it cancels what it
// runs and refuses what it would start, rolls its transaction back, and touches nothing outside it.
import postgres from 'postgres';
import t, { type Test } from 'tap';
import type { Sql } from '../../src/db/client.js';
import { currentScope, runInScope, scopedPool, StatementScope } from '../../src/db/statement-scope.js';
import { createBatcher } from '../../src/pki/issuance/batcher.js';
import { createTestDatabase } from '../helpers/database.js';
import { sleep, waitUntil } from '../helpers/wait.js';

const REFUSED = 'scope abandoned';
const newScope = () => new StatementScope(() => new Error(REFUSED));

async function setup(t: Test): Promise<{ raw: Sql; sql: Sql }> {
  const db = await createTestDatabase();
  const raw = postgres(db.url, { max: 4, onnotice: () => undefined }) as unknown as Sql;
  t.teardown(async () => {
    await raw.end({ timeout: 1 });
    await db.drop();
  });
  await raw`create table probe (name text not null)`;
  return { raw, sql: scopedPool(raw) };
}

const activeSleeps = (raw: Sql) => raw<{ n: number }[]>`
  select count(*)::int as n from pg_stat_activity
  where datname = current_database() and state = 'active' and query like '%pg_sleep(30)%' and pid <> pg_backend_pid()`;

t.test('outside a scope the scoped pool only forwards', async (t) => {
  const { sql } = await setup(t);
  const fragment = sql`name = ${'a'}`;
  await sql`insert into probe ${sql({ name: 'a' }, 'name')}`;
  t.same([...(await sql`select name from probe where ${fragment}`)], [{ name: 'a' }], 'fragments and helpers work as on the pool');
  t.same([...(await sql.unsafe('select count(*)::int as n from probe'))], [{ n: 1 }], 'unsafe');
  const n = await sql.begin(async (tx) => {
    await tx`insert into probe (name) values ('b')`;
    return tx.savepoint(async (sp) => (await sp`select count(*)::int as n from probe`)[0]!.n as number);
  });
  t.equal(n, 2, 'transactions and savepoints');
});

t.test('abandoning cancels a running statement at once and refuses the next', async (t) => {
  const { raw, sql } = await setup(t);
  const scope = newScope();
  const started = Date.now();
  const running = runInScope(scope, () => sql`select pg_sleep(30)`.then(() => 'finished'));
  await waitUntil(async () => (await activeSleeps(raw))[0]!.n === 1, 5000, 'the statement running');
  scope.abandon();
  await t.rejects(running, { code: '57014' }, 'cancelled by PostgreSQL');
  t.ok(Date.now() - started < 10_000, 'without waiting for it to end');
  t.same(await activeSleeps(raw), [{ n: 0 }], 'nothing left running');
  t.equal(scope.stopped, 1);
  await t.rejects(runInScope(scope, async () => {
    await sleep(1); // a later continuation of the same work
    await sql`insert into probe (name) values ('late')`;
  }), { message: REFUSED }, 'a statement the work starts afterwards is refused');
  await t.rejects(runInScope(scope, async () => sql.begin(async (tx) => tx`insert into probe (name) values ('late')`)), { message: REFUSED }, 'so is a transaction');
  t.same([...(await raw`select count(*)::int as n from probe`)], [{ n: 0 }], 'nothing written');
  t.equal(scope.stopped, 3);
});

t.test('a transaction whose statement is cancelled rolls back', async (t) => {
  const { raw, sql } = await setup(t);
  const scope = newScope();
  const work = runInScope(scope, () => sql.begin(async (tx) => {
    await tx`insert into probe (name) values ('first')`;
    await tx`select pg_sleep(30)`;
    await tx`insert into probe (name) values ('second')`;
  }));
  await waitUntil(async () => (await activeSleeps(raw))[0]!.n === 1, 5000, 'the transaction waiting');
  scope.abandon();
  await t.rejects(work, { code: '57014' });
  t.same([...(await raw`select name from probe`)], [], 'the first insert rolled back, the second never sent');
  t.same([...(await raw`select count(*)::int as n from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`)], [{ n: 0 }], 'no transaction left open');
});

t.test('abandoning one scope leaves other work alone, and a closed scope tracks nothing', async (t) => {
  const { raw, sql } = await setup(t);
  const scope = newScope();
  const other = newScope();
  const outside = sql`select pg_sleep(0.5), 'outside' as who`.execute();
  const inOther = runInScope(other, () => sql`select pg_sleep(0.5), 'other' as who`.then((r) => r[0]!.who));
  const mine = runInScope(scope, () => sql`select pg_sleep(30)`.execute());
  // A fragment built in the scope and never sent must not turn into a rejection nobody handles.
  runInScope(scope, () => sql`where true`);
  await waitUntil(async () => (await activeSleeps(raw))[0]!.n === 1, 5000, 'the scope statement running');
  scope.abandon();
  await t.rejects(mine, { code: '57014' });
  t.equal((await outside)[0]!.who, 'outside', 'a statement outside any scope ends normally');
  t.equal(await inOther, 'other', 'another scope is untouched');
  scope.close();
  const late = await runInScope(scope, () => sql`select 'after close' as who`);
  t.equal(late[0]!.who, 'after close', 'after close the work runs untracked (timers it left behind)');
});

t.test('shared batches run outside every scope and skip items whose caller was abandoned', async (t) => {
  const seen: { items: string[]; inScope: boolean }[] = [];
  const batcher = createBatcher<string, string>({
    maxBatch: 10, concurrency: 1,
    run: async (items) => {
      seen.push({ items, inScope: currentScope() !== undefined });
      return items.map((i) => `done ${i}`);
    },
  });
  const kept = newScope();
  const dropped = newScope();
  const a = runInScope(kept, () => batcher.submit('a'));
  const b = runInScope(dropped, () => batcher.submit('b'));
  const c = batcher.submit('c');
  dropped.abandon(); // before the batch starts (it starts a microtask later)
  t.equal(await a, 'done a');
  await t.rejects(b, { message: REFUSED }, 'the abandoned caller\'s item is refused, not written');
  t.equal(await c, 'done c');
  t.same(seen, [{ items: ['a', 'c'], inScope: false }], 'one batch without it, run outside the callers\' scopes');
  kept.abandon();
  t.equal(await runInScope(newScope(), () => batcher.submit('d')), 'done d', 'another caller\'s abandonment changes nothing for later work');
});
