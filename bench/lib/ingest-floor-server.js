// Owns the ingest floor: the least this stack (uWebSockets.js, postgres.js, PostgreSQL) can spend on one
// HTTP publish stored durably. It reads the body, JSON-parses it, queues it, writes every queued publish
// in one INSERT per batch (the service's own batch builder and statement, from dist/, into the service's
// messages table, counters included) and answers 202 once that batch committed: no authentication,
// authorization, SenML validation or bookkeeping. The service's CPU per message over this floor's, in the
// same run, is what the service itself adds. With FLOOR_REPLY_AFTER_MS set it stores nothing: each batch
// is answered that many ms after it formed, as a commit would answer it (what uWS alone costs for a
// publish that is read, parsed and answered from a later turn of the loop).
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { repoRoot } from './paths.js';
import { listenAndAnnounce, nativeUws } from './uws-server.js';

const selfPath = fileURLToPath(import.meta.url);
/** The entry file as the service starter takes it: relative to the repository root. */
export const FLOOR_ENTRY = relative(repoRoot, selfPath);

// A fixed workspace and publisher: the floor does not authenticate, it only stores.
const WORKSPACE = '00000000-0000-4000-8000-00000000f100';
const PUBLISHER = '00000000-0000-4000-8000-00000000f101';

/** A module of the built service (npm run build), the same code the service runs. */
const built = (/** @type {string} */ path) => import(pathToFileURL(join(repoRoot, 'dist', 'src', path)).href);

async function serveFloor() {
  const { migrate } = await built('db/migrate.js');
  const { buildBatch } = await built('messaging/batch-literals.js');
  const { insertBatch } = await built('messaging/queries.js');
  // The service's own dependencies, so the floor runs the same versions.
  const uws = nativeUws('a floor');
  const postgres = createRequire(join(repoRoot, 'package.json'))('postgres');
  const replyAfterMs = process.env.FLOOR_REPLY_AFTER_MS === undefined ? null : Number(process.env.FLOOR_REPLY_AFTER_MS);
  const sql = postgres(process.env.DATABASE_URL, { max: 1, prepare: true, fetch_types: false, onnotice: () => {} });
  const quiet = { info() {}, warn() {}, error() {}, debug() {} };
  if (replyAfterMs === null) await migrate(sql, join(repoRoot, 'sql'), quiet);

  /** @type {{res: any, aborted: boolean, channel: string, record: any}[]} */
  let queue = [];
  let writing = false;
  let scheduled = false;
  // Natural group commit: whatever arrived while a batch was being written is the next batch.
  const flush = () => {
    scheduled = false;
    if (writing || queue.length === 0) return;
    const jobs = queue;
    queue = [];
    writing = true;
    insert(jobs).then(() => {
      writing = false;
      for (const j of jobs) if (!j.aborted) j.res.cork(() => j.res.writeStatus('202 Accepted').end());
      flush();
    }, (err) => {
      console.error(JSON.stringify({ level: 'error', msg: 'floor insert failed', err: String(err) }));
      process.exit(1);
    });
  };
  // The record as stored, without the service's checks: name bn + n, time now + t.
  const insert = (jobs) => {
    if (replyAfterMs !== null) return new Promise((resolve) => setTimeout(resolve, replyAfterMs));
    const now = Date.now() / 1000;
    const items = jobs.map(({ channel, record: r }) => ({
      workspaceId: WORKSPACE,
      messages: [{
        channel, publisher: PUBLISHER, protocol: 'http', subtopic: null, name: `${r.bn ?? ''}${r.n ?? ''}`, unit: r.u ?? null,
        time: now + (r.t ?? 0), value: r.v ?? null, stringValue: null, boolValue: null, dataValue: null, sum: null,
      }],
    }));
    return insertBatch(sql, buildBatch(items));
  };

  const app = uws
    .App()
    .post('/http/m/:ws/c/:ch', (res, req) => {
      const job = { res, aborted: false, channel: req.getParameter(1), record: null };
      res.onAborted(() => {
        job.aborted = true;
      });
      let body = '';
      res.onData((chunk, isLast) => {
        body += Buffer.from(chunk).toString('utf8');
        if (!isLast) return;
        job.record = JSON.parse(body)[0];
        queue.push(job);
        if (!writing && !scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    });
  const listenSocket = await listenAndAnnounce(uws, app, 'messaging', 'ingest floor');
  process.on('SIGTERM', () => {
    uws.us_listen_socket_close(listenSocket);
    sql.end({ timeout: 5 }).finally(() => process.exit(0));
  });
}

if (process.argv[1] === selfPath) await serveFloor();
