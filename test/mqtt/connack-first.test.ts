// CONNACK is the first packet a resuming client receives, even when a message for its restored
// subscription arrives while aedes is still connecting it (MQTT-3.2.0-1). The window is made certain here:
// the message is published from inside the step aedes runs between restoring subscriptions and writing
// the CONNACK (storing the will). Without the hold, mqtt.js receives the PUBLISH first and never connects.
import net from 'node:net';
import t from 'tap';
import { Aedes, type Client } from 'aedes';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { holdDeliveriesUntilConnack, releaseOnConnack } from '../../src/mqtt/connack-first.js';

const TOPIC = 'fleet/telemetry';

async function startBroker(hold: boolean) {
  const broker = await Aedes.createBroker({
    authenticate(client: Client, _user, _pass, done) {
      if (hold) holdDeliveriesUntilConnack(client);
      done(null, true);
    },
  });
  if (hold) releaseOnConnack(broker);
  const server = net.createServer((socket) => broker.handle(socket));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const close = () => new Promise<void>((r) => broker.close(() => server.close(() => r())));
  return { broker, port, close };
}

function connect(port: number, options: IClientOptions): Promise<{ client: MqttClient; received: string[] }> {
  const received: string[] = [];
  const client = mqtt.connect(`mqtt://127.0.0.1:${port}`, { reconnectPeriod: 0, connectTimeout: 1500, ...options });
  client.on('packetreceive', (p) => received.push(p.cmd));
  return new Promise((resolve, reject) => {
    client.once('connect', () => resolve({ client, received }));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

/** A persistent session subscribed to TOPIC, left; then a publish lands while the client resumes it. */
async function resumeDuringPublish(hold: boolean) {
  const { broker, port, close } = await startBroker(hold);
  try {
    const clientId = `resumer-${hold}`;
    const first = await connect(port, { clientId, clean: false });
    await first.client.subscribeAsync(TOPIC, { qos: 1 });
    await first.client.endAsync();

    const persistence = (broker as unknown as { persistence: { delWill(c: Client): Promise<unknown> } }).persistence;
    const delWill = persistence.delWill.bind(persistence);
    persistence.delWill = async (client) => {
      // Not awaited: the delivery's callback, and so the publish's, waits for the CONNACK when held.
      broker.publish({ cmd: 'publish', topic: TOPIC, payload: Buffer.from('mid-connect'), qos: 1, retain: false, dup: false }, () => undefined);
      await new Promise((r) => setTimeout(r, 20)); // an unheld delivery has been written by now
      return delWill(client);
    };
    const second = await connect(port, { clientId, clean: false });
    const message = await new Promise<string>((r) => second.client.once('message', (_topic, payload) => r(payload.toString())));
    await second.client.endAsync();
    return { received: second.received, message };
  } finally {
    await close();
  }
}

t.test('a message arriving while a persistent session resumes comes after the CONNACK', async (t) => {
  const { received, message } = await resumeDuringPublish(true);
  t.equal(received[0], 'connack', 'CONNACK first');
  t.equal(message, 'mid-connect', 'the message held back is delivered once connected');
});

t.test('without the hold, aedes writes that PUBLISH first and the client cannot connect', async (t) => {
  await t.rejects(resumeDuringPublish(false), /connack timeout/, 'the defect this guards against is real');
});
