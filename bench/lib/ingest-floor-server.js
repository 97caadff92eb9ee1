// Owns the ingest floor: the least this stack (uWebSockets.js, postgres.js, PostgreSQL) can spend on one
// HTTP publish stored durably. It reads the body, JSON-parses it, queues it, writes every queued publish
// in one INSERT per batch (the service's statement, into the service's messages table) and answers 202
// once that batch committed: no authentication, authorization, SenML validation or bookkeeping. The
// service's CPU per message over this floor's, in the same run, is what the service itself adds.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from './paths.js';
import { listenAndAnnounce, nativeUws } from './uws-server.js';

const selfPath = fileURLToPath(import.meta.url);
/** The entry file as the service starter takes it: relative to the repository root. */
export const FLOOR_ENTRY = relative(repoRoot, selfPath);

// A fixed workspace and publisher: the floor does not authenticate, it only stores.
const WORKSPACE = '00000000-0000-4000-8000-00000000f100';
const PUBLISHER = '00000000-0000-4000-8000-00000000f101';

/** The messages table as the service's migration creates it, when the database does not have it yet. */
async function ensureTable(sql) {
  const [{ exists }] = await sql`select to_regclass('messages') is not null as exists`;
  if (!exists) await sql.unsafe(readFileSync(join(repoRoot, 'sql', '0050_create_messages.sql'), 'utf8'));
}

async function serveFloor() {
  // The service's own dependencies, so the floor runs the same versions.
  const uws = nativeUws('a floor');
  const postgres = createRequire(join(repoRoot, 'package.json'))('postgres');
  const sql = postgres(process.env.DATABASE_URL, { max: 1, prepare: true, fetch_types: false, onnotice: () => {} });
  await ensureTable(sql);

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
  const insert = (jobs) => {
    let p = '', names = '', units = '', times = '', values = '';
    const now = Date.now() / 1000;
    for (let i = 0; i < jobs.length; i++) {
      const s = i === 0 ? '' : ',';
      const r = jobs[i].record;
      p += `${s}1`;
      names += `${s}"${r.bn ?? ''}${r.n ?? ''}"`;
      units += `${s}"${r.u ?? ''}"`;
      times += s + String(now + (r.t ?? 0));
      values += s + String(r.v ?? 0);
    }
    return sql`insert into messages (workspace_id, channel_id, publisher_id, protocol, subtopic, name, unit, time, value)
      select (${`{${WORKSPACE}}`}::uuid[])[m.p], (${`{${jobs[0].channel}}`}::uuid[])[m.p], (${`{${PUBLISHER}}`}::uuid[])[m.p],
             (${'{http}'}::text[])[m.p], (${'{NULL}'}::text[])[m.p], m.name, m.unit, m.time, m.value
      from unnest(${`{${p}}`}::int[], ${`{${names}}`}::text[], ${`{${units}}`}::text[], ${`{${times}}`}::float8[], ${`{${values}}`}::float8[])
        as m(p, name, unit, time, value)`;
  };

  const app = uws
    .App()
    // One channel per run (the scenario's): the batch takes the first publish's channel for all.
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
