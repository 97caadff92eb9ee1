// Issue 35.2: the outbox relay's webhook target slow (beyond SVC_PKI_OUTBOX_WEBHOOK_TIMEOUT_MS) and then
// failing, repeatedly. The relay retries the record at the head with a growing backoff (the gaps between
// attempts are measured), holds the records behind it back (in order), loses nothing, and no record is
// accepted twice: a record is sent again only after an attempt that timed out or was refused.
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { startAuthService } from '../../helpers/auth.js';
import { makeCaFiles } from '../../helpers/pki.js';
import { sleep, waitUntil } from '../../helpers/wait.js';

const TIMEOUT_MS = 300;
// Large enough that the doubling shows through a loaded machine's scheduling noise (a second, at times).
const BASE_MS = 300;
// The target's answers to the first attempts, in order; every later attempt is accepted.
const SCRIPT = ['slow', 'slow', 'fail', 'fail', 'fail'] as const;

interface Attempt { id: string; at: number; answer: 'slow' | 'fail' | 'accepted' }

t.test('a slow, then failing webhook target: growing backoff, in order, nothing lost, nothing accepted twice', async (t) => {
  const attempts: Attempt[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['x-svc-event-id']);
      const answer = SCRIPT[attempts.length] ?? 'accepted';
      attempts.push({ id, at: Date.now(), answer });
      // Slow: answers only after the relay gave up on it, and then refuses (it never counts as accepted).
      if (answer === 'slow') setTimeout(() => res.writeHead(503).end(), TIMEOUT_MS * 3);
      else res.writeHead(answer === 'fail' ? 500 : 200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

  const ca = makeCaFiles(t);
  const ts = await startAuthService(t, {
    ...ca.env,
    SVC_PKI_OUTBOX_WEBHOOK_URL: url, SVC_PKI_OUTBOX_WEBHOOK_SECRET: 'faults-webhook-secret-0123456789',
    SVC_PKI_OUTBOX_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), SVC_PKI_OUTBOX_POLL_INTERVAL_MS: '50',
    SVC_PKI_OUTBOX_RETRY_BASE_MS: String(BASE_MS), SVC_PKI_OUTBOX_RETRY_MAX_MS: '60000',
  });
  const sql = ts.service.sql;
  // Whatever the service wrote at start is delivered first (accepted, once the script is spent): wait for
  // an empty outbox, so the records below are the ones the script meets.
  await waitUntil(async () => (await sql<{ n: number }[]>`select count(*)::int as n from event_outbox where delivered_at is null`)[0]!.n === 0,
    10_000, 'the outbox empty before the test').catch(() => undefined);
  attempts.length = 0;

  // Three records, written as the service writes them (one statement; the relay reads them in seq order).
  const ids = (await sql<{ id: string }[]>`
    insert into event_outbox (event, tenant_id, payload)
    select 'faults.test', null, jsonb_build_object('n', n) from generate_series(1, 3) n
    returning id`).map((r) => r.id);
  const started = Date.now();
  await waitUntil(async () => (await sql<{ n: number }[]>`
    select count(*)::int as n from event_outbox where id in ${sql(ids)} and delivered_at is not null`)[0]!.n === ids.length,
  30_000, 'every record delivered');
  await sleep(200);
  t.comment(`delivered in ${Date.now() - started} ms; attempts: ${attempts.map((a) => `${a.id.slice(0, 8)} ${a.answer} +${a.at - started}`).join(', ')}`);

  const ours = attempts.filter((a) => ids.includes(a.id));
  const head = ours.filter((a) => a.id === ours[0]!.id);
  t.same(head.map((a) => a.answer), [...SCRIPT, 'accepted'], 'the record at the head is retried through the whole script');
  t.same(ours.slice(0, head.length).map((a) => a.id), head.map((a) => a.id), 'nothing behind it goes out while it waits: in order');

  // The gaps between attempts: each at least the backoff BASE × 2^(attempts before it). (A slow attempt
  // adds up to its timeout, counted by the relay from before the request reached this server, so it
  // is not part of the floor.)
  const gaps = head.slice(1).map((a, i) => a.at - head[i]!.at);
  t.comment(`gaps between attempts: ${gaps.join(', ')} ms`);
  gaps.forEach((gap, i) => {
    const floor = BASE_MS * 2 ** i;
    t.ok(gap >= floor * 0.95, `gap ${i + 1}: ${gap} ms ≥ backoff ${floor} ms`);
  });
  // Growth, compared where the backoffs differ by 4× or more (neighbours differ by 2×, which a scheduling
  // delay of a second can hide on a loaded machine; the floors above check each one).
  t.ok(gaps[4]! > gaps[2]! && gaps[4]! > gaps[1]! && gaps[3]! > gaps[0]!,
    `the gaps grow: the 5th (${gaps[4]} ms) beyond the 2nd and 3rd (${gaps[1]}, ${gaps[2]} ms), the 4th (${gaps[3]} ms) beyond the 1st (${gaps[0]} ms)`);

  const accepted = ours.filter((a) => a.answer === 'accepted').map((a) => a.id);
  t.same([...accepted].sort(), [...ids].sort(), 'every record accepted exactly once: nothing lost, nothing twice');
  t.same(accepted, ids, 'accepted in the order written');
  const [row] = await sql<{ attempts: number; last_error: string | null }[]>`select attempts, last_error from event_outbox where id = ${ours[0]!.id}`;
  if (row) t.equal(row.attempts, SCRIPT.length + 1, 'the attempts are recorded with the record');
});
