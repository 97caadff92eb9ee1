// The whole-run secret scan's own proof (test/helpers/secret-scan.ts): in a scanned run (`npm test`,
// `npm run test:proof`), this file sends the service a secret and then plants it in its database, where
// no service code would put it. test/secret-scan-verdict.mjs requires the scan to report exactly this leak
// for this file: a scan that stopped seeing secrets, or stopped searching databases, fails the run.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { ADMIN_ID, AUTH_ENV } from '../helpers/auth.js';
import { scanning } from '../helpers/secret-scan.js';
import { gql, startTestService } from '../helpers/service.js';

t.test('a secret sent to the service and planted in its database is found by the scan', { skip: !scanning && 'the run is not scanned (run it through npm test)' }, async (t) => {
  const ts = await startTestService(t, AUTH_ENV);
  const canary = `canary-${randomBytes(12).toString('hex')}`;
  // Sent bound to a variable whose own name says nothing (`$pw`): the scan reads the binding to know it.
  const res = await gql(ts.url(), 'mutation ($e: ID!, $pw: String!) { createPassword(entityId: $e, password: $pw) }', { e: ADMIN_ID, pw: canary });
  t.equal(res.body.errors?.[0]?.extensions.code, 'UNAUTHENTICATED', 'sent as a password (refused, no token): the scan notes it');
  await ts.service.sql`update entities set attributes = ${ts.service.sql.json({ planted: canary })} where id = ${ADMIN_ID}`;
  t.pass('planted: the verdict expects this leak in table entities');
});
