// The administrator's bootstrap password: none without a secret on an external database, generated and
// printed once on the embedded default, never reset afterwards.
import t from 'tap';
import { bootstrapAdmin } from '../../src/auth/bootstrap.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { ADMIN_ID, login } from '../helpers/auth.js';
import { gql, startTestService } from '../helpers/service.js';

t.test('generated once, printed once, then kept', async (t) => {
  const ts = await startTestService(t, { SVC_SCRYPT_COST: '1024' });
  const bad = await gql(ts.url(), `mutation { login(input: {identifier: "admin", secret: "anything-at-all"}) { token } }`);
  t.equal(bad.body.errors?.[0].message, 'invalid credentials', 'an external database without SVC_ADMIN_SECRET: no password');
  const lines: string[] = [];
  const log = createLogger('info', (line) => void lines.push(line));
  const settings = { adminEntityId: ADMIN_ID, adminIdentifier: 'admin', adminSecret: undefined, embedded: true, scrypt: { cost: 1024, blockSize: 8, parallelization: 1 } };
  t.equal(await bootstrapAdmin(ts.service.sql, settings, log), 'generated');
  const printed = lines.map((l) => JSON.parse(l) as { msg: string; password?: string }).filter((l) => l.password);
  t.equal(printed.length, 1, 'one clearly marked line');
  t.match(printed[0]!.msg, /GENERATED ADMINISTRATOR PASSWORD/);
  t.ok(await login(ts, 'admin', printed[0]!.password!), 'the printed password works');
  t.equal(await bootstrapAdmin(ts.service.sql, settings, log), 'exists');
  t.equal(await bootstrapAdmin(ts.service.sql, { ...settings, adminSecret: 'another-secret-value' }, log), 'exists', 'a configured secret never resets it');
  t.equal(lines.filter((l) => l.includes('"password"')).length, 1, 'never printed again');
  t.equal(await bootstrapAdmin(ts.service.sql, { ...settings, adminEntityId: '00000000-0000-0000-0000-0000000000ff' }, log), 'none');
});

t.test('a too short SVC_ADMIN_SECRET stops the start with the policy message', async (t) => {
  t.throws(() => loadConfig({ SVC_ADMIN_SECRET: 'short' }), /SVC_ADMIN_SECRET must be at least 12 characters/);
  t.throws(() => loadConfig({ SVC_ADMIN_ENTITY_ID: 'admin' }), /SVC_ADMIN_ENTITY_ID must be a UUID/);
  t.throws(() => loadConfig({ SVC_TRUSTED_ORIGINS: 'not a url' }), /SVC_TRUSTED_ORIGINS entries must be URLs/);
});
