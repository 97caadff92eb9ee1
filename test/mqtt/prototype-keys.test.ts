// Topic filters and client ids named like Object.prototype members (GHSA-52qw-whmv-87c5, fixed in aedes
// 1.2.0 but not in the 2.0 beta the service runs): an authenticated device sending them is refused, and
// the broker keeps serving everyone else.
import t from 'tap';
import { insertTenant, startAuthService } from '../helpers/auth.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';
import { BROKER_ENV, deviceClient, inbox, publish, sleep, subscribe } from './helpers.js';

const NAMES = ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__'];

t.test('prototype member names as topics and client ids', async (t) => {
  const ts = await startAuthService(t, BROKER_ENV);
  const port = ts.service.ports.mqtt!;
  const ws = await insertTenant(ts, 'proto');
  const ch = await insertChannel(ts, ws, 'line');
  const dev = await insertDevice(ts, ws, 'dev');
  await grant(ts, ws, dev.id, ch, ['publish', 'subscribe']);
  const topic = `m/${ws}/c/${ch}`;

  for (const version of [4, 5] as const) {
    await t.test(`MQTT ${version === 5 ? '5' : '3.1.1'}`, async (t) => {
      for (const name of NAMES) {
        const c = await deviceClient(t, port, dev, { protocolVersion: version, clientId: name });
        const closed = new Promise<void>((r) => c.once('close', () => r()));
        // One SUBSCRIBE with several filters (aedes de-duplicates those through an object), then the rest.
        c.subscribe([name, topic, name], { qos: 1 }, () => undefined);
        c.unsubscribe([name, 'constructor'], () => undefined);
        c.publish(name, '[]', { qos: 1 }, () => undefined);
        await Promise.race([closed, sleep(300)]);
        c.end(true);
      }
      t.pass('every combination sent');
    });
  }

  await t.test('the broker still serves', async (t) => {
    const sub = await deviceClient(t, port, dev, { protocolVersion: 5 });
    t.same(await subscribe(sub, topic, 1), [1]);
    const box = inbox(sub);
    const pub = await deviceClient(t, port, dev, { clientId: 'constructor' });
    await publish(pub, topic, JSON.stringify([{ n: 'alive', v: 1 }]), { qos: 1 });
    const [got] = await box.waitFor(1);
    t.equal(JSON.parse(got!.payload)[0].n, 'alive', 'a message still goes through');
    t.ok(ts.service.ports.mqtt, 'the service is up');
  });
});
