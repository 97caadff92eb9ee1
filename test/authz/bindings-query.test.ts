// A subject's grants are read on every cache miss and after every change to them, and the blocks of a
// policy not compiled yet: both queries must cost what the subject holds, not what the platform holds.
// With 20,000 blocks on the platform and 200 held by the subject, PostgreSQL's plans must reach
// permission_blocks by key only, never by a scan of it or of every block of some tenant.
import t from 'tap';
import { selectBlocks, selectGrants } from '../../src/authz/queries.js';
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

/** The plan of a query function's statement: a tag that sends its text with EXPLAIN in front. */
async function planOf(sql: Awaited<ReturnType<typeof migratedDatabase>>['sql'], run: (q: Queryable) => Promise<unknown>): Promise<PlanNode> {
  let plan: PlanNode | undefined;
  const explaining = (async (strings: TemplateStringsArray, ...values: unknown[]) => {
    const text = strings.reduce((acc, s, i) => `${acc}$${i}${s}`);
    const [row] = await sql.unsafe(`explain (format json) ${text}`, values as never[]);
    plan = (row!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
    return [];
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
