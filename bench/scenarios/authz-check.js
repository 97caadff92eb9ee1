// Scenario: POST /authz/check over HTTP with a memoised decision: bearer authentication (verified-token
// cache), the caller gate (platform administrator asking about a device), the cached decision, the
// allowed-check audit counter and the JSON reply.
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';

const ADMIN_SECRET = 'bench-admin-secret-0123456789';

export default {
  name: 'authz-check',
  description: 'POST /authz/check, admin asks whether a device may publish to a channel (decision memoised)',
  // The issue pairs the efficiency with a p99 under 1 ms "at that load". At 64 connections the generator
  // saturates its core and even the bare handler's p99 is 3-4 ms, so the bound can only be judged below
  // saturation: 4 connections, where the bare handler's p99 is about 0.4 ms (it is measured there too).
  // `--connections 64` shows the saturated case.
  connections: 4,
  target: { efficiency: 0.5, p99Us: 1000 },
  env: { SVC_ADMIN_SECRET: ADMIN_SECRET },
  async setup(ctx) {
    const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
    const ids = { tenant: randomUUID(), device: randomUUID(), channel: randomUUID(), block: randomUUID() };
    try {
      await sql`insert into tenants (id, name) values (${ids.tenant}, ${`bench-${ids.tenant.slice(0, 8)}`})`;
      await sql`insert into entities (id, kind, name, tenant_id) values (${ids.device}, 'device', 'bench-device', ${ids.tenant})`;
      await sql`insert into resources (id, kind, name, tenant_id) values (${ids.channel}, 'channel', 'bench-channel', ${ids.tenant})`;
      await sql`insert into permission_blocks (id, tenant_id, scope_mode, object_kind, object_id) values (${ids.block}, ${ids.tenant}, 'object', 'resource', ${ids.channel})`;
      await sql`insert into permission_block_actions (block_id, action_id) select ${ids.block}, id from actions where name in ('publish', 'subscribe')`;
      await sql`insert into direct_policies (tenant_id, subject_kind, entity_id, block_id) values (${ids.tenant}, 'entity', ${ids.device}, ${ids.block})`;
    } finally {
      await sql.end();
    }
    const res = await fetch(`http://127.0.0.1:${ctx.ports.http}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'mutation ($i: LoginInput!) { login(input: $i) { token } }', variables: { i: { identifier: 'admin', secret: ADMIN_SECRET } } }),
    });
    const body = await res.json();
    const token = body.data?.login?.token;
    if (!token) throw new Error(`admin login failed: ${JSON.stringify(body)}`);
    const check = JSON.stringify({ subject_id: ids.device, action: 'publish', resource_id: ids.channel });
    const probe = await fetch(`http://127.0.0.1:${ctx.ports.http}/authz/check`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: check });
    const answer = await probe.json();
    if (!answer.allowed) throw new Error(`setup check was not allowed: ${JSON.stringify(answer)}`);
    return { token, body: check };
  },
  request: (ctx) => ({
    method: 'POST',
    path: '/authz/check',
    headers: { authorization: `Bearer ${ctx.data.token}`, 'content-type': 'application/json' },
    body: ctx.data.body,
    expectedStatus: 200,
  }),
};
