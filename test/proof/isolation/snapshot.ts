// What "nothing of the target tenant changed" means, table by table: a hash of the target's rows in every
// table that holds them (directly by tenant_id, or through its entities, groups, roles, blocks, profiles,
// authorities and endpoints), its audit log and its certificates; plus the platform's own rows (global
// roles, actions, rules, endpoints, authorities), which no tenant-bound caller may change either.
// A table that appears in the schema without a line here fails the matrix (coverage grows with the schema).
import type { Sql } from '../../../src/db/client.js';

const ENTS = `(select id from entities where tenant_id = $1)`;
const GROUPS = `(select id from groups where tenant_id = $1)`;
const ROLES = `(select id from roles where tenant_id = $1)`;
const BLOCKS = `(select id from permission_blocks where tenant_id = $1)`;
const CREDS = `(select id from credentials where entity_id in ${ENTS})`;

/** table → the target's rows (select list and filter; $1 is the target tenant). null: not tenant data, why. */
export const TARGET_ROWS: Record<string, string | { skip: string }> = {
  tenants: `select * from tenants where id = $1`,
  entities: `select * from entities where tenant_id = $1`,
  entity_counts: `select * from entity_counts where tenant_id = $1`,
  entity_emails: `select * from entity_emails where entity_id in ${ENTS}`,
  email_verification_tokens: `select * from email_verification_tokens where entity_id in ${ENTS}`,
  // last_used_at moves whenever the scoped caller's token or the device's key authenticates: not a change.
  credentials: `select id, entity_id, kind, identifier, secret_hash, issuer_id, status, scoped, name, description, metadata, expires_at,
    created_by, created_at, revoked_at, revoked_by, revocation_reason from credentials where entity_id in ${ENTS}`,
  // The ceilings of the target's tokens (another tenant's token may name the target in its own ceiling:
  // that only narrows its owner's grants, and is that tenant's row).
  credential_permission_limits: `select * from credential_permission_limits where credential_id in ${CREDS}`,
  sessions: `select id, entity_id, tenant_id, revoked_at, revoked_reason from sessions where entity_id in ${ENTS} or tenant_id = $1`,
  resources: `select * from resources where tenant_id = $1`,
  groups: `select * from groups where tenant_id = $1`,
  object_group_entities: `select * from object_group_entities where group_id in ${GROUPS} or entity_id in ${ENTS}`,
  object_group_resources: `select * from object_group_resources where group_id in ${GROUPS} or resource_id in (select id from resources where tenant_id = $1)`,
  principal_group_members: `select * from principal_group_members where group_id in ${GROUPS} or entity_id in ${ENTS}`,
  ownerships: `select * from ownerships where owner_id in ${ENTS} or owned_id in ${ENTS}`,
  tenant_memberships: `select * from tenant_memberships where tenant_id = $1`,
  tenant_invitations: `select * from tenant_invitations where tenant_id = $1`,
  roles: `select * from roles where tenant_id = $1`,
  role_assignments: `select * from role_assignments where tenant_id = $1 or role_id in ${ROLES} or entity_id in ${ENTS} or group_id in ${GROUPS}`,
  role_permission_blocks: `select * from role_permission_blocks where role_id in ${ROLES} or block_id in ${BLOCKS}`,
  permission_blocks: `select * from permission_blocks where tenant_id = $1 or object_id in (select id from resources where tenant_id = $1) or object_id in ${ENTS}`,
  permission_block_actions: `select * from permission_block_actions where block_id in ${BLOCKS}`,
  direct_policies: `select * from direct_policies where tenant_id = $1 or entity_id in ${ENTS} or group_id in ${GROUPS} or block_id in ${BLOCKS}`,
  action_assignment_rules: `select * from action_assignment_rules where tenant_id = $1`,
  profiles: `select * from profiles where tenant_id = $1`,
  profile_versions: `select * from profile_versions where profile_id in (select id from profiles where tenant_id = $1)`,
  api_endpoints: `select * from api_endpoints where tenant_id = $1`,
  // A refused call is recorded in the endpoint's log as `denied` (matrix.test.ts says why).
  api_endpoint_executions: `select * from api_endpoint_executions where endpoint_id in (select id from api_endpoints where tenant_id = $1) and status <> 'denied'`,
  // Refused attempts on the target may be recorded there as `deny` entries (matrix.test.ts says why).
  audit_log: `select * from audit_log where tenant_id = $1 and outcome <> 'deny'`,
  pki_authorities: `select * from pki_authorities where tenant_id = $1`,
  certificate_profiles: `select * from certificate_profiles where tenant_id = $1`,
  certificate_revocations: `select * from certificate_revocations where tenant_id = $1 or entity_id in ${ENTS}`,
  certificate_renewals: `select * from certificate_renewals where previous_credential_id in ${CREDS} or replacement_credential_id in ${CREDS}`,
  certificate_issuance_requests: `select * from certificate_issuance_requests where credential_id in ${CREDS} or scope_id in ${ENTS}`,
  certificate_lifecycle_notices: `select * from certificate_lifecycle_notices where subject_id in ${CREDS} or subject_id in (select id from pki_authorities where tenant_id = $1)`,
  event_outbox: `select id, event, tenant_id, payload, created_at from event_outbox where tenant_id = $1`,
  messages: `select * from messages where workspace_id = $1`,
  message_counts: `select * from message_counts where channel_id in (select id from resources where tenant_id = $1)`,
  // Derived caches and process bookkeeping, not tenant data.
  certificate_crl_state: { skip: 'a cache of each issuer\'s CRL, regenerated on demand by the public CRL route' },
  auth_keys: { skip: 'the service\'s own key material' },
  auth_login_failures: { skip: 'login throttling counters by address and identifier' },
  broker_nodes: { skip: 'cluster node heartbeats' },
  schema_migrations: { skip: 'migrations' },
  signing_keys: { skip: 'platform signing keys (PLATFORM_ROWS)' },
  actions: { skip: 'platform catalog (PLATFORM_ROWS)' },
  action_applicability: { skip: 'platform catalog (PLATFORM_ROWS)' },
};

/** The platform's rows no tenant-bound caller may change (checked alongside the target's). */
export const PLATFORM_ROWS: Record<string, string> = {
  actions: `select * from actions`,
  action_applicability: `select * from action_applicability`,
  signing_keys: `select kid, status, retired_at from signing_keys`,
  'roles (platform)': `select * from roles where tenant_id is null`,
  'permission_blocks (platform)': `select * from permission_blocks where tenant_id is null`,
  'role_assignments (platform roles)': `select * from role_assignments where role_id in (select id from roles where tenant_id is null)`,
  'action_assignment_rules (global)': `select * from action_assignment_rules where tenant_id is null`,
  'api_endpoints (platform)': `select * from api_endpoints where tenant_id is null`,
  'pki_authorities (platform)': `select * from pki_authorities where tenant_id is null`,
  'certificate_profiles (platform)': `select * from certificate_profiles where tenant_id is null`,
  'tenants (others)': `select id, name, alias, status, deleted_at from tenants where id <> $1`,
};

export type Snapshot = Record<string, string>;

export async function tablesWithoutLine(sql: Sql): Promise<string[]> {
  // Partitions are read through their parent (messages), so only parents and plain tables count.
  const rows = await sql<{ table_name: string }[]>`
    select c.relname as table_name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition`;
  return rows.map((r) => r.table_name).filter((name) => !(name in TARGET_ROWS)).sort();
}

/** One round trip: an md5 over each table's rows (as text, sorted). */
export async function snapshot(sql: Sql, tenantId: string): Promise<Snapshot> {
  const parts: string[] = [];
  const add = (label: string, select: string) =>
    parts.push(`select ${quote(label)} as label, md5(coalesce(string_agg(x::text, '|' order by x::text), '')) as hash, count(*)::int as n from (${select}) x`);
  for (const [table, select] of Object.entries(TARGET_ROWS)) if (typeof select === 'string') add(table, select);
  for (const [label, select] of Object.entries(PLATFORM_ROWS)) add(`platform: ${label}`, select);
  const rows = await sql.unsafe<{ label: string; hash: string; n: number }[]>(parts.join('\nunion all\n'), [tenantId]);
  return Object.fromEntries(rows.map((r) => [r.label, `${r.n}:${r.hash}`]));
}

export function changedTables(before: Snapshot, after: Snapshot): string[] {
  return Object.keys({ ...before, ...after }).filter((k) => before[k] !== after[k]);
}

function quote(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}
