import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import t from 'tap';
import { startEmbeddedPostgres } from '../../src/db/embedded.js';
import { testLogger } from '../helpers/service.js';

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

t.test('embedded PostgreSQL starts from an empty directory and keeps data across a restart', async (t) => {
  // mkdtemp makes it 0700, as `mktemp -d` does for a clean clone: as root, PostgreSQL runs as its own
  // user, and the service opens the way through for it.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-embedded-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const port = await freePort();

  const first = await startEmbeddedPostgres(dir, port, testLogger());
  let sql = postgres(first.url, { max: 1, onnotice: () => undefined });
  await sql`create table kept (v text)`;
  await sql`insert into kept values ('written before the restart')`;
  await sql.end();
  await first.stop();

  const second = await startEmbeddedPostgres(dir, port, testLogger());
  t.teardown(() => second.stop());
  t.equal(second.url, first.url, 'same credentials after restart');
  sql = postgres(second.url, { max: 1 });
  const rows = await sql`select v from kept`;
  await sql.end();
  t.same(rows.map((r) => r.v), ['written before the restart']);
});
