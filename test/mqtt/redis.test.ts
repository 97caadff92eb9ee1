// Two instances sharing MQTT state through Redis (127.0.0.1:6379): a message published on one reaches a
// subscriber on the other, a retained message set on one is delivered by the other, and a persistent
// session left on one is resumed on the other with what arrived meanwhile. Skipped without Redis.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { Redis } from 'ioredis';
import { AUTH_ENV, insertTenant } from '../helpers/auth.js';
import { createTestDatabase } from '../helpers/database.js';
import { startTestService } from '../helpers/service.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';
import { BROKER_ENV, deviceClient, inbox, publish, subscribe } from './helpers.js';

const REDIS_URL = process.env.SVC_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function redisUp(): Promise<boolean> {
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

t.test('MQTT state shared through Redis', async (t) => {
  if (!(await redisUp())) return t.plan(0, `no Redis at ${REDIS_URL}`);
  const prefix = `svc-test:${randomBytes(4).toString('hex')}:`;
  const env = { ...AUTH_ENV, ...BROKER_ENV, SVC_REDIS_URL: REDIS_URL, SVC_REDIS_KEY_PREFIX: prefix };
  const db = await createTestDatabase();
  t.teardown(async () => {
    await db.drop();
    const r = new Redis(REDIS_URL);
    const keys = await r.keys(`${prefix}*`);
    if (keys.length) await r.del(...keys);
    r.disconnect();
  });
  const a = await startTestService(t, env, db);
  const b = await startTestService(t, env, db);
  const ws = await insertTenant(a, 'shared-fleet');
  const ch = await insertChannel(a, ws, 'shared');
  const dev = await insertDevice(a, ws, 'roamer');
  await grant(a, ws, dev.id, ch, ['publish', 'subscribe']);
  await b.service.authz.invalidate({ kind: 'all' });
  const topic = `m/${ws}/c/${ch}`;
  const [portA, portB] = [a.service.ports.mqtt!, b.service.ports.mqtt!];

  const subB = await deviceClient(t, portB, dev);
  await subscribe(subB, topic, 1);
  const boxB = inbox(subB);
  const pubA = await deviceClient(t, portA, dev);
  await publish(pubA, topic, JSON.stringify([{ n: 'across', v: 1 }]), { qos: 1 });
  const [got] = await boxB.waitFor(1);
  t.equal(JSON.parse(got!.payload)[0].n, 'across', 'published on A, delivered by B');

  await publish(pubA, `${topic}/state`, JSON.stringify([{ n: 'state', v: 2 }]), { qos: 1, retain: true });
  const lateB = await deviceClient(t, portB, dev);
  const lateBox = inbox(lateB);
  await subscribe(lateB, `${topic}/state`, 1);
  const [retained] = await lateBox.waitFor(1);
  t.match(retained, { retain: true, topic: `${topic}/state` }, 'retained on A, delivered by B');

  const clientId = `roamer-${Date.now()}`;
  const onA = await deviceClient(t, portA, dev, { clientId, clean: false });
  await subscribe(onA, topic, 1);
  await new Promise<void>((r) => onA.end(false, {}, () => r()));
  await publish(pubA, topic, JSON.stringify([{ n: 'queued', v: 3 }]), { qos: 1 });
  const onB = await deviceClient(t, portB, dev, { clientId, clean: false });
  const resumed = inbox(onB);
  const [queued] = await resumed.waitFor(1);
  t.equal(JSON.parse(queued!.payload)[0].n, 'queued', 'session left on A resumed on B');
});
