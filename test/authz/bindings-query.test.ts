// A subject's grants are read on every cache miss and after every change to them, and the blocks of a
// policy not compiled yet: both queries must cost what the subject holds, not what the platform holds.
// With 20,000 blocks on the platform and 200 held by the subject, PostgreSQL's plans must reach
// permission_blocks by key only, never by a scan of it or of every block of some tenant.
import t from 'tap';
import { selectBlocks, selectGrants, selectGrantsInTenants } from '../../src/authz/queries.js';
import type { Queryable } from '../../src/db/client.js';
import { migratedDatabase } from '../helpers/migrated.js';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

interface Fragment {
  fragment: { strings: TemplateStringsArray; values: unknown[] };
}

/** A statement's text with its fragments written in place and its values numbered in `params`. */
function textOf(strings: TemplateStringsArray, values: unknown[], params: unknown[]): string {
  return strings.reduce((acc, s, i) => {
    const v = values[i - 1];
    if (v !== null && typeof v === 'object' && 'fragment' in v) {
      const f = (v as Fragment).fragment;
      return `${acc}${textOf(f.strings, f.values, params)}${s}`;
    }
    params.push(v);
    return `${acc}$${params.length}${s}`;
  });
}

/**
 * The plan of a query function's statement: a tag that sends its text with EXPLAIN in front (a tagged
 * piece with no select of its own is a fragment of the statement, written in place).
 */
async function planOf(sql: Awaited<ReturnType<typeof migratedDatabase>>['sql'], run: (q: Queryable) => Promise<unknown>): Promise<PlanNode> {
  let plan: PlanNode | undefined;
  const explaining = ((strings: TemplateStringsArray, ...values: unknown[]) => {
    if (!/\bselect\b/.test(strings.join(''))) return { fragment: { strings, values } } satisfies Fragment;
    const params: unknown[] = [];
    const text = textOf(strings, values, params);
    return sql.unsafe(`explain (format json) ${text}`, params as never[]).then(([row]) => {
      plan = (row!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
      return [];
    });
  }) as unknown as Queryable;
  await run(explaining);
  return plan!;
}

t.test('grants and blocks are looked up by key however many blocks the platform holds', async (t) => {
  const { sql } = await migratedDatabase(t);
  const [tenant] = await sql<{ id: string }[]>`insert into tenants (name) values ('plan') returning id`;
  const [device] = await sql<{ id: string }[]>`insert into entities (kind, name, tenant_id) values ('device', 'd', ${tenant!.id}) returning id`;
  const [role] = await sql<{ id: string }[]>`insert into roles (name, tenant_id) values ('r', ${tenant!.id}) returning id`;
  await sql`insert into permission_blocks (tenant_id, scope_mode) select ${tenant!.id}, 'tenant' from generate_series(1, 20000)`;
  await sql`insert into role_permission_blocks (role_id, block_id) select ${role!.id}, id from permission_blocks where tenant_id = ${tenant!.id} limit 200`;
  await sql`insert into permission_block_actions (block_id, action_id)
            select rpb.block_id, a.id from role_permission_blocks rpb, actions a where rpb.role_id = ${role!.id} and a.name = 'publish'`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenant!.id}, 'entity', ${device!.id}, ${role!.id})`;
  // A deleted tenant owning a block the role also holds: hidden, and its presence must not turn the
  // per-block lookups into a scan.
  const [gone] = await sql<{ id: string }[]>`insert into tenants (name, status, deleted_at) values ('gone', 'deleted', now()) returning id`;
  const [hidden] = await sql<{ id: string }[]>`insert into permission_blocks (tenant_id, scope_mode) values (${gone!.id}, 'tenant') returning id`;
  await sql`insert into role_permission_blocks (role_id, block_id) values (${role!.id}, ${hidden!.id})`;
  await sql`analyze`;

  const grants = await selectGrants(sql as unknown as Queryable, device!.id);
  t.equal(grants.length, 1, 'one grant');
  t.equal(grants[0]!.block_ids.length, 200, 'with every held block');
  t.notOk(grants[0]!.block_ids.includes(hidden!.id), "but the deleted tenant's");
  t.same(grants[0]!.block_ids, [...grants[0]!.block_ids].sort(), 'sorted');
  const blocks = await selectBlocks(sql as unknown as Queryable, grants[0]!.block_ids);
  t.equal(blocks.length, 200);
  t.same(blocks[0]!.actions, ['publish']);

  for (const [name, run] of [
    ['selectGrants', (q: Queryable) => selectGrants(q, device!.id)],
    ['selectBlocks', (q: Queryable) => selectBlocks(q, grants[0]!.block_ids)],
  ] as const) {
    const scans = nodesOf(await planOf(sql, run)).filter((n) => n['Relation Name'] === 'permission_blocks').map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''}`);
    t.ok(scans.length > 0, `${name}: the plan reads permission_blocks`);
    t.ok(scans.every((s) => s === 'Index Scan permission_blocks_pkey'), `${name}: permission_blocks reached only by key (${scans.join(', ')})`);
  }
});

t.test("a subject's grants in one tenant are looked up by (entity, tenant), however many tenants it holds grants in", async (t) => {
  const { sql } = await migratedDatabase(t);
  // An operator holding a role in each of 2,000 tenants (the tenant-admin roles of tenants it created).
  const [op] = await sql<{ id: string }[]>`insert into entities (kind, name) values ('human', 'op') returning id`;
  const tenants = await sql<{ id: string }[]>`insert into tenants (name) select 't' || g from generate_series(1, 2000) g returning id`;
  await sql`
    with r as (insert into roles (name, tenant_id) select 'tenant-admin', id from tenants returning id, tenant_id),
         b as (insert into permission_blocks (tenant_id, scope_mode) select tenant_id, 'tenant' from r returning id, tenant_id),
         l as (insert into role_permission_blocks (role_id, block_id) select r.id, b.id from r join b using (tenant_id))
    insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) select tenant_id, 'entity', ${op!.id}, id from r`;
  await sql`analyze`;
  const one = tenants[7]!.id;
  const grants = await selectGrantsInTenants(sql as unknown as Queryable, op!.id, [one]);
  t.equal(grants.length, 1, 'the grant of that tenant alone');
  t.equal(grants[0]!.grant_tenant_id, one);
  t.equal((await selectGrants(sql as unknown as Queryable, op!.id)).length, 2000, 'all of them without the filter');

  const plan = nodesOf(await planOf(sql, (q) => selectGrantsInTenants(q, op!.id, [one])));
  // A bitmap index scan names its index only; the heap scan above it names the table.
  const assignments = plan.filter((n) => n['Relation Name'] === 'role_assignments' || n['Index Name']?.startsWith('role_assignments'));
  const shown = assignments.map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''}`).join(', ');
  t.notOk(assignments.some((n) => n['Node Type'] === 'Seq Scan'), `no scan of role_assignments (${shown})`);
  const indexes = assignments.flatMap((n) => n['Index Name'] ?? []);
  // By (entity, tenant) or by tenant for the entity's own; by group for its principal groups' (none here).
  t.ok(indexes.length > 0 && indexes.every((i) => ['role_assignments__entity_tenant', 'role_assignments__tenant', 'role_assignments__group'].includes(i)),
    `role_assignments reached by the tenant, not by every assignment of the subject (${shown})`);
});
