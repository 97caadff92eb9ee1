// CoAP observers on the real service, with the coap client: messages stored over HTTP, MQTT and CoAP reach
// a device observing the channel (resolved SenML); a device without subscribe and a device of another
// workspace are refused; a revoked key stops the notifications at the next revalidation.
import t from 'tap';
import { adminToken, insertTenant, startAuthService } from '../helpers/auth.js';
import { gql } from '../helpers/service.js';
import { grant, insertChannel, insertDevice } from '../messaging/helpers.js';
import { BROKER_ENV, coapObserve, coapPost, deviceClient, publish, sleep, waitUntil } from './helpers.js';

const senml = (n: string, v: number) => JSON.stringify([{ bn: 'urn:dev:obs:', n, u: 'Cel', v }]);
const records = (payloads: string[]) => payloads.flatMap((p) => JSON.parse(p) as { n: string; v?: number }[]);

t.test('CoAP observation through the messaging pipeline', async (t) => {
  const ts = await startAuthService(t, { ...BROKER_ENV, SVC_COAP_REVALIDATE_SECS: '1' });
  const coapPort = ts.service.ports.coap!;
  const mqttPort = ts.service.ports.mqtt!;
  const ws = await insertTenant(ts, 'observed');
  const otherWs = await insertTenant(ts, 'elsewhere');
  const ch = await insertChannel(ts, ws, 'boiler');
  const otherCh = await insertChannel(ts, otherWs, 'their boiler');
  const [publisher, watcher, publishOnly, revoked] = await Promise.all(['publisher', 'watcher', 'publish-only', 'revoked'].map((n) => insertDevice(ts, ws, n)));
  const foreign = await insertDevice(ts, otherWs, 'foreign');
  await grant(ts, ws, publisher!.id, ch, ['publish']);
  await grant(ts, ws, watcher!.id, ch, ['subscribe']);
  await grant(ts, ws, publishOnly!.id, ch, ['publish']);
  await grant(ts, ws, revoked!.id, ch, ['subscribe']);
  await grant(ts, otherWs, foreign!.id, otherCh, ['publish', 'subscribe']);
  const path = `/m/${ws}/c/${ch}`;
  const httpPublish = (body: string) => fetch(`${ts.url('messaging')}/http/m/${ws}/c/${ch}`, {
    method: 'POST', headers: { authorization: `Client ${publisher!.key}`, 'content-type': 'application/senml+json' }, body,
  });

  await t.test('an observer gets what is stored over HTTP, MQTT and CoAP, as resolved SenML', async (t) => {
    const obs = await coapObserve(t, coapPort, `${path}?auth=${watcher!.key}`);
    t.equal(obs.code, '2.05');
    t.equal((await httpPublish(senml('http', 1))).status, 202);
    const pub = await deviceClient(t, mqttPort, publisher!);
    await publish(pub, `m/${ws}/c/${ch}/kitchen`, senml('mqtt', 2), { qos: 1 });
    t.match(await coapPost(coapPort, `${path}?auth=${publisher!.key}`, senml('coap', 3)), { code: '2.04' });
    await obs.waitFor(4);
    const got = records(obs.payloads);
    t.same(got.map((r) => [r.n, r.v]).filter(([n]) => n !== undefined), [
      ['urn:dev:obs:http', 1], ['urn:dev:obs:mqtt', 2], ['urn:dev:obs:coap', 3],
    ], 'the registration\'s empty pack, then each message once, in order');
    t.match(got[0], { n: 'urn:dev:obs:http', u: 'Cel', t: Number }, 'base name joined, time absolute');
  });

  await t.test('a subtopic observer gets only that subtopic', async (t) => {
    const obs = await coapObserve(t, coapPort, `${path}/kitchen?auth=${watcher!.key}`);
    t.equal(obs.code, '2.05');
    t.equal((await httpPublish(senml('not-kitchen', 4))).status, 202);
    t.match(await coapPost(coapPort, `${path}/kitchen?auth=${publisher!.key}`, senml('kitchen', 5)), { code: '2.04' });
    await obs.waitFor(2);
    await sleep(100);
    t.same(records(obs.payloads).map((r) => r.n), ['urn:dev:obs:kitchen']);
  });

  await t.test('a device without subscribe, and a device of another workspace, are refused', async (t) => {
    t.equal((await coapObserve(t, coapPort, `${path}?auth=${publishOnly!.key}`)).code, '4.03', 'publish is not subscribe');
    const intruder = await coapObserve(t, coapPort, `${path}?auth=${foreign!.key}`);
    t.ok(['4.03', '4.04'].includes(intruder.code), `another workspace's device refused (${intruder.code})`);
    t.equal((await coapObserve(t, coapPort, `${path}?auth=not-a-key`)).code, '4.01');
    t.equal((await coapObserve(t, coapPort, `/m/${otherWs}/c/${otherCh}?auth=${foreign!.key}`)).code, '2.05', 'while its own channel is observable');
  });

  await t.test('a revoked key ends the observation at the next revalidation', async (t) => {
    const obs = await coapObserve(t, coapPort, `${path}?auth=${revoked!.key}`);
    t.equal(obs.code, '2.05');
    const res = await gql(ts.url(), 'mutation ($c: ID!) { revokeCredential(credentialId: $c) }', { c: revoked!.credentialId }, await adminToken(ts));
    t.equal(res.body.data?.revokeCredential, true);
    // Revalidation runs every second: publish until one is no longer notified, then once more.
    let n = 0;
    await waitUntil(async () => {
      const before = obs.payloads.length;
      t.equal((await httpPublish(senml('after-revoke', ++n))).status, 202);
      await sleep(300);
      return obs.payloads.length === before;
    }, 10_000, 'the observation ended');
    const before = obs.payloads.length;
    t.equal((await httpPublish(senml('after-revoke', ++n))).status, 202);
    await sleep(300);
    t.equal(obs.payloads.length, before, 'no notification once revoked');
  });
});
