import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import readline from 'node:readline';
import t from 'tap';
import { projectRoot } from '../../src/paths.js';
import { createTestDatabase } from '../helpers/database.js';
import { QUIET_LISTENERS } from '../helpers/service.js';

t.test('SIGTERM with a request in flight: the request completes, the process exits 0', async (t) => {
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const child = spawn(process.execPath, [path.join(projectRoot, 'dist/src/main.js')], {
    env: { PATH: process.env.PATH, ...QUIET_LISTENERS, DATABASE_URL: db.url, SVC_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  // The port from its "listening" line; the request only after "ready": the signal handlers are installed
  // once the start has finished, and a SIGTERM before that (a slow start on a loaded machine) kills outright.
  const port = await new Promise<number>((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout });
    let http: number | undefined;
    lines.on('line', (line) => {
      const entry = JSON.parse(line);
      if (entry.msg === 'listening' && entry.listener === 'http') http = entry.port;
      if (entry.msg === 'ready' && http !== undefined) resolve(http);
    });
    child.on('exit', () => reject(new Error('service exited before listening')));
  });

  // Send headers and half a body, then SIGTERM, then the rest: the answer must still come back.
  const body = JSON.stringify({ query: '{ health }' });
  const half = Math.floor(body.length / 2);
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  let response = '';
  socket.on('data', (d) => (response += d));
  socket.write(`POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, half)}`);
  await new Promise((r) => setTimeout(r, 200));
  child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  t.equal(child.exitCode, null, 'still running while the request is in flight');
  socket.write(body.slice(half));
  await new Promise((r) => socket.once('close', r));
  t.match(response, /^HTTP\/1.1 200 /);
  t.match(response, '{"data":{"health":"ok"}}');
  t.equal(await exited, 0);

  const refused = await new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('error', () => resolve(true));
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
  });
  t.ok(refused, 'the port is closed after shutdown');
});
