import { spawn } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { projectRoot } from '../../src/paths.js';

t.test('the service refuses to start on uWebSockets.js\'s slow JavaScript fallback, before touching the database', async (t) => {
  // UWS_USE_FALLBACK makes the package's loader pick its pure-JS build, as a failed native load would.
  const child = spawn(process.execPath, [path.join(projectRoot, 'dist/src/main.js')], {
    env: { PATH: process.env.PATH, UWS_USE_FALLBACK: '1',
      // Nothing listens there: reaching the database would fail differently (and slowly).
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', SVC_HTTP_ADDR: '127.0.0.1:0',
      SVC_MESSAGING_ADDR: 'off', SVC_READER_ADDR: 'off', SVC_BROKER_ADMIN_ADDR: 'off', SVC_MQTT_ADDR: 'off', SVC_COAP_ADDR: 'off', SVC_GRPC_ADDR: 'off' },
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  child.stdout.resume();
  const code = await new Promise((resolve) => child.on('exit', resolve));
  t.equal(code, 1);
  t.match(stderr, 'uWebSockets.js native binary did not load');
});
