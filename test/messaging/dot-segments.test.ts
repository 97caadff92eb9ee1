// Issue 21 point 7: subtopic segments '.' and '..' are path syntax, not names, and are refused on every
// protocol: HTTP publish (sent raw, as a client that does not normalise its path would), the MQTT and
// CoAP topic parser (one function), MQTT subscription filters, and the reader's and live socket's
// subtopic parameter. Nothing is stored.
import { request } from 'node:http';
import t from 'tap';
import { subtopicParam, subtopicProblem } from '../../src/messaging/subtopic.js';
import { parsePublishTopic, parseSubscribeFilter } from '../../src/mqtt/topics.js';
import { AUTH_ENV } from '../helpers/auth.js';
import { startTestService, type TestService } from '../helpers/service.js';
import { countRows, read, SENML, world } from './helpers.js';

const WS = '6a1e3b52-47b1-4ad6-9a8e-6a3cf1b0c001';
const CH = '6a1e3b52-47b1-4ad6-9a8e-6a3cf1b0c002';
const DOTS = ['.', '..', 'a/..', '../b', 'a/./b', 'room/../../x'];

t.test('the one subtopic rule, and every parser built on it', async (t) => {
  for (const s of DOTS) {
    t.equal(subtopicProblem(s.split('/')), "subtopic segments '.' and '..' are not allowed", `rule: ${s}`);
    t.equal(parsePublishTopic(`m/${WS}/c/${CH}/${s}`), null, `MQTT and CoAP publish: ${s}`);
    t.equal(parseSubscribeFilter(`m/${WS}/c/${CH}/${s}`), null, `MQTT subscription: ${s}`);
    t.throws(() => subtopicParam(s), { message: "'subtopic': subtopic segments '.' and '..' are not allowed" }, `reader and live socket: ${s}`);
  }
  for (const s of ['...', '.hidden', 'v1.2', 'a..b']) {
    t.equal(subtopicProblem(s.split('/')), null, `a name with dots is still a name: ${s}`);
  }
  t.same(parseSubscribeFilter(`m/${WS}/c/${CH}/+/#`)?.subtopic, '+/#', 'wildcards are unaffected');
});

function rawPublish(ts: TestService, path: string, key: string): Promise<{ status: number; body: string }> {
  const url = new URL(ts.url('messaging'));
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method: 'POST', path, headers: { authorization: `Client ${key}`, 'content-type': SENML } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => { body += c.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(JSON.stringify([{ n: 'x', v: 1 }]));
  });
}

t.test('over HTTP: publish and read refuse them, and store nothing', async (t) => {
  const ts = await startTestService(t, AUTH_ENV);
  const w = await world(ts);
  const base = `/http/m/${w.ws}/c/${w.channel}`;
  t.equal((await rawPublish(ts, `${base}/room`, w.publisher.key)).status, 202, 'a plain subtopic is stored');
  for (const s of ['..', '.', 'room/..', 'room/%2E%2E', '%2e']) {
    const res = await rawPublish(ts, `${base}/${s}`, w.publisher.key);
    t.equal(res.status, 400, `publish ${s}: ${res.body}`);
  }
  t.equal(await countRows(ts, w.channel), 1);
  const reader = await read(ts, w.ws, w.channel, `Client ${w.publisher.key}`, 'subtopic=room/..');
  t.equal(reader.status, 400);
  t.same(reader.body, { error: "'subtopic': subtopic segments '.' and '..' are not allowed" });
});
