// Issue 35.2: PostgreSQL connections terminated during MQTT (QoS 1), CoAP (confirmable) and HTTP publish
// load. Every message acknowledged (PUBACK, 2.04, 202) is stored; a failure reaches its client as no
// acknowledgement (the MQTT connection closes or CONNACK says server unavailable, CoAP answers 5.03, HTTP
// 503); the service recovers by itself. Every backend of the service's database is killed, the writer's,
// the pool's and the LISTEN connection alike, from a connection of the test's own.
import type { MqttClient } from 'mqtt';
import postgres from 'postgres';
import t from 'tap';
import { startAuthService } from '../../helpers/auth.js';
import { sleep, waitUntil } from '../../helpers/wait.js';
import { publish as httpPublish, world } from '../../messaging/helpers.js';
import { BROKER_ENV, coapPost, deviceClient } from '../../mqtt/helpers.js';

const pack = (name: string) => JSON.stringify([{ n: name, v: 1 }]);

/** A client gives up on an answer after `ms` (counted as a failure: nothing acknowledged). */
function within<T>(ms: number, work: Promise<T>, late: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([work, new Promise<T>((r) => { timer = setTimeout(() => r(late), ms); })]).finally(() => clearTimeout(timer));
}

// The service (in process here) must not leave a rejection unhandled when a backend dies: postgres.js did,
// for the array-type lookup on each new connection (patches/postgres+3.4.9.patch).
const unhandled: string[] = [];
process.prependListener('unhandledRejection', (err: unknown) => {
  unhandled.push(`${String(err)}${(err as { query?: string })?.query ? ` (query: ${(err as { query: string }).query.trim().slice(0, 60)})` : ''}`);
});

t.test('connections killed under MQTT, CoAP and HTTP publish load: acknowledged = stored, failures unacknowledged, recovery', async (t) => {
  const ts = await startAuthService(t, { ...BROKER_ENV, SVC_MESSAGING_WRITE_TIMEOUT_MS: '1000' });
  const w = await world(ts, 'faults-publish');
  const topic = `m/${w.ws}/c/${w.channel}`;
  const killer = postgres(ts.db.url, { max: 1, onnotice: () => undefined });
  t.teardown(() => killer.end());

  let stop = false;
  const acked = { mqtt: [] as string[], coap: [] as string[], http: [] as string[] };
  const failures = { mqtt: new Map<string, number>(), coap: new Map<string, number>(), http: new Map<string, number>() };
  const count = (m: Map<string, number>, what: string) => m.set(what, (m.get(what) ?? 0) + 1);
  let seq = 0;

  // One MQTT publisher: QoS 1, one message in flight, a new connection whenever the broker closes one.
  const mqttWorker = async (id: number) => {
    let client: MqttClient | undefined;
    while (!stop) {
      if (!client || !client.connected) {
        try {
          client = await deviceClient(t, ts.service.ports.mqtt!, w.publisher, { clientId: `faults-${id}-${seq++}` });
        } catch (err) {
          count(failures.mqtt, `connect: ${(err as { code?: number }).code ?? (err as Error).message}`);
          await sleep(50);
          continue;
        }
      }
      const c = client;
      const name = `mqtt-${id}-${seq++}`;
      const outcome = await within(10_000, new Promise<string>((resolve) => {
        const onClose = () => resolve('closed without PUBACK');
        c.once('close', onClose);
        c.publish(topic, pack(name), { qos: 1 }, (err) => {
          c.off('close', onClose);
          resolve(err ? `publish error: ${err.message}` : 'acked');
        });
      }), 'no answer in 10 s');
      if (outcome === 'no answer in 10 s') c.end(true);
      if (outcome === 'acked') acked.mqtt.push(name);
      else count(failures.mqtt, outcome);
    }
    client?.end(true);
  };

  const coapWorker = async (id: number) => {
    while (!stop) {
      const name = `coap-${id}-${seq++}`;
      const res = await within(10_000, coapPost(ts.service.ports.coap!, `/${topic}?auth=${encodeURIComponent(w.publisher.key)}`, pack(name),
        { 'Content-Format': 'application/senml+json' }).catch((err: Error) => ({ code: 'error', payload: err.message })),
      { code: 'no answer', payload: 'in 10 s' });
      if (res.code === '2.04') acked.coap.push(name);
      else count(failures.coap, `${res.code} ${res.payload}`);
    }
  };

  const httpWorker = async (id: number) => {
    while (!stop) {
      const name = `http-${id}-${seq++}`;
      const res = await httpPublish(ts, w.ws, w.channel, w.publisher.key, [{ n: name, v: 1 }]);
      const body = await res.text();
      if (res.status === 202) acked.http.push(name);
      else count(failures.http, `${res.status} ${body.slice(0, 80)}`);
    }
  };

  const workers = [
    ...Array.from({ length: 4 }, (_, i) => mqttWorker(i)),
    ...Array.from({ length: 4 }, (_, i) => coapWorker(i)),
    ...Array.from({ length: 4 }, (_, i) => httpWorker(i)),
  ];
  let kills = 0;
  const ackedAt = () => ({ mqtt: acked.mqtt.length, coap: acked.coap.length, http: acked.http.length });
  let atStormEnd = ackedAt();
  try {
    await waitUntil(() => acked.mqtt.length > 0 && acked.coap.length > 0 && acked.http.length > 0, 15_000, 'every protocol acknowledged before the storm');
    // The storm: every backend of the service's database, 20 times 75 ms apart.
    for (let i = 0; i < 20; i++) {
      // In the select list, not the WHERE clause: there the planner may call it before excluding our own pid.
      const killed = await killer<{ done: boolean }[]>`select pg_terminate_backend(pid) as done from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid()`;
      kills += killed.filter((k) => k.done).length;
      await sleep(75);
    }
    atStormEnd = ackedAt();
    // Recovered by itself: each protocol gets acknowledgements again, with the load still running.
    await waitUntil(() => acked.mqtt.length > atStormEnd.mqtt && acked.coap.length > atStormEnd.coap && acked.http.length > atStormEnd.http,
      15_000, 'every protocol acknowledged again after the storm').catch(() => undefined);
  } finally {
    stop = true;
    await Promise.all(workers);
  }
  t.comment(`${kills} backends killed; acknowledged ${JSON.stringify(ackedAt())} (at the storm's end ${JSON.stringify(atStormEnd)})`);
  for (const p of ['mqtt', 'coap', 'http'] as const) t.comment(`${p} failures: ${JSON.stringify([...failures[p]])}`);
  t.ok(kills >= 20, 'the storm killed the service\'s backends');

  for (const p of ['mqtt', 'coap', 'http'] as const) {
    t.ok(acked[p].length > atStormEnd[p], `${p}: acknowledged again after the storm without a restart`);
  }
  // Failures are only the ones that say "not stored, retry": never an authentication or authorization refusal
  // (a lookup that failed for want of the database is not a wrong key), never a 500.
  // A confirmable request left unanswered past the client's patience is no acknowledgement either (on a
  // machine at load 15 the answer can come after the client gave up; it would retransmit).
  t.same([...failures.coap.keys()].filter((k) => !k.startsWith('5.03') && k !== 'no answer in 10 s'), [],
    'CoAP failures are 5.03 (or no answer) only');
  // A valid key is never refused as invalid: its lookup fails (5.03) or finds it. It once did, 1 run in 5: a
  // query cut mid-row-stream left postgres.js's row index past 0, the lookup on the reconnected connection
  // resolved as [<hole>, row] and read as no row (patches/postgres+3.4.9.patch, test/foundation/sparse-result.test.ts).
  t.notOk(failures.coap.has('4.01 invalid device key'), 'no valid key refused as invalid during the storm');
  t.same([...failures.http.keys()].filter((k) => !k.startsWith('503')), [], 'HTTP failures are 503 only');
  // A CONNACK that does not come within the client's 5 s (the broker's authentication waiting on a database
  // connection) is no acknowledgement either: the client connects again.
  const mqttFailureKinds = new Set(['closed without PUBACK', 'connect: 3', 'connect: connack timeout']);
  t.same([...failures.mqtt.keys()].filter((k) => !mqttFailureKinds.has(k)), [],
    'MQTT failures are a connection closed without PUBACK, CONNACK 3 (server unavailable) or no CONNACK');
  t.same(unhandled, [], 'no unhandled rejection in the service');

  const stored = new Set((await killer<{ name: string }[]>`select name from messages where channel_id = ${w.channel}`).map((r) => r.name));
  for (const p of ['mqtt', 'coap', 'http'] as const) {
    const missing = acked[p].filter((n) => !stored.has(n));
    t.same(missing, [], `${p}: ${acked[p].length} acknowledged, every one stored`);
  }
  const [dupes] = await killer<{ n: number }[]>`select count(*)::int as n from (select name from messages where channel_id = ${w.channel}
    group by name having count(*) > 1) d`;
  t.equal(dupes!.n, 0, 'no message stored twice');
});
