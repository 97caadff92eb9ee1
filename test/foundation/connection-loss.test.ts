// A transaction whose PostgreSQL backend dies mid-statement (a server restart, a failover,
// pg_terminate_backend) fails that request and nothing else. Unpatched, postgres.js 3.4.9 writes the
// transaction's ROLLBACK to the closed socket from a timer and throws an uncaught TypeError that ends the
// process (porsager/postgres#1154, #1208); patches/postgres+3.4.9.patch settles that write with
// CONNECTION_CLOSED instead.
import postgres from 'postgres';
import t from 'tap';
import { startAuthService } from '../helpers/auth.js';
import { sleep } from '../helpers/wait.js';

t.test('a transaction whose connection dies mid-statement rejects; the process keeps serving', async (t) => {
  const ts = await startAuthService(t);
  const killer = postgres(ts.db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => killer.end({ timeout: 1 }));
  const sql = ts.service.sql;
  for (let round = 0; round < 3; round++) {
    const failed = sql.begin(async (tx) => {
      const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
      setTimeout(() => void killer`select pg_terminate_backend(${row!.pid})`.catch(() => undefined), 100);
      await tx`select pg_sleep(5)`;
    });
    await t.rejects(failed, { code: /^(CONNECTION_CLOSED|ECONNRESET)$/ }, `round ${round}: the transaction fails with the connection`);
    await sleep(100); // the ROLLBACK postgres.js sends on the dead connection is written on a later tick
    t.same([...(await sql`select 1 as one`)], [{ one: 1 }], 'the pool goes on with a new connection');
    const res = await fetch(`${ts.url()}/health`);
    t.equal(res.status, 200, 'and the service answers');
    await res.arrayBuffer();
  }
});
