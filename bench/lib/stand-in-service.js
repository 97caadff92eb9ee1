// TEMPORARY stand-in for dist/src/main.js during harness development; delete before commit.
import { createRequire } from 'node:module';
import postgres from 'postgres';
const uws = createRequire(import.meta.url)('uWebSockets.js');
const sql = postgres(process.env.DATABASE_URL, { max: 4 });
await sql`select 1`;
const log = (o) => console.log(JSON.stringify({ level: 'info', ...o }));
const tokens = [];
const addr = (v) => { const [h, p] = v.split(':'); return [h, Number(p)]; };
const make = (name, envName, setup) => {
  const [host, port] = addr(process.env[envName]);
  return new Promise((resolve) => setup(uws.App()).listen(host, port, (t) => { tokens.push(t); log({ msg: 'listening', listener: name, host, port: uws.us_socket_local_port(t) }); resolve(); }));
};
await make('http', 'SVC_HTTP_ADDR', (app) => app
  .get('/health/live', (res) => { res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end('{"status":"ok"}'); })
  .post('/graphql', (res) => {
    let aborted = false; res.onAborted(() => { aborted = true; });
    let buf = '';
    res.onData((chunk, last) => { buf += Buffer.from(chunk).toString(); if (!last) return;
      sql`select 1 as x`.then(() => { if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end('{"data":{"__typename":"Query"}}')); });
    });
  }));
await make('messaging', 'SVC_MESSAGING_ADDR', (app) => app);
log({ msg: 'ready' });
process.on('SIGTERM', async () => { tokens.forEach((t) => uws.us_listen_socket_close(t)); await sql.end(); process.exit(0); });
