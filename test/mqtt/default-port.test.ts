// The MQTT listener at its built-in address (0.0.0.0:1883) steps aside, with a warning, when another
// broker holds that port (this machine's Mosquitto, or a socket this test opens): `npm start` still runs.
// An address the operator chose must bind, or the start fails.
import net from 'node:net';
import t from 'tap';
import { createLogger } from '../../src/log.js';
import { startService } from '../../src/main.js';
import { createTestDatabase } from '../helpers/database.js';
import { QUIET_LISTENERS } from '../helpers/service.js';

const MQTT_DEFAULT_PORT = 1883;

/** Holds 1883 unless something (a broker) already does; either way the port is taken afterwards. */
async function occupyDefaultPort(t: { teardown(fn: () => unknown): void }): Promise<void> {
  const server = net.createServer();
  await new Promise<void>((resolve) => {
    server.once('error', () => resolve()); // EADDRINUSE: already taken, which is what the test needs
    server.listen(MQTT_DEFAULT_PORT, '0.0.0.0', () => {
      t.teardown(() => new Promise<void>((r) => server.close(() => r())));
      resolve();
    });
  });
}

function capturingLogger() {
  const lines: { level: string; msg: string }[] = [];
  const log = createLogger('warn', (line: string) => lines.push(JSON.parse(line)));
  return { log, lines };
}

t.test('MQTT at its default address steps aside when the port is taken', async (t) => {
  await occupyDefaultPort(t);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  const { SVC_MQTT_ADDR: _chosen, ...listeners } = QUIET_LISTENERS;
  const { log, lines } = capturingLogger();
  const service = await startService({ ...listeners, SVC_RATE_LIMIT_ENABLED: 'false', DATABASE_URL: db.url }, { log });
  t.teardown(() => service.stop());
  t.equal(service.ports.mqtt, undefined, 'no MQTT listener');
  t.ok(service.ports.http, 'the other listeners run');
  t.match(lines.find((l) => l.level === 'warn' && l.msg.startsWith('mqtt listener not started')),
    { msg: /0\.0\.0\.0:1883 is in use .* set SVC_MQTT_ADDR to a free address, or to off/ }, 'the warning says what to do');
});

t.test('an MQTT address the operator chose must bind', async (t) => {
  await occupyDefaultPort(t);
  const db = await createTestDatabase();
  t.teardown(() => db.drop());
  await t.rejects(startService({ ...QUIET_LISTENERS, SVC_MQTT_ADDR: `0.0.0.0:${MQTT_DEFAULT_PORT}`, SVC_RATE_LIMIT_ENABLED: 'false', DATABASE_URL: db.url },
    { log: createLogger('silent') }), { code: 'EADDRINUSE' });
});
