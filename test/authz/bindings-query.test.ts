// A subject's bindings are read on every cache miss and after every change to its grants: the query must
// cost what the subject holds, not what the platform holds. With 20,000 blocks on the platform and 200
// held by the subject, PostgreSQL's plan must reach permission_blocks by key, never by a scan of it.
import t from 'tap';
import { selectBindings } from '../../src/authz/queries.js';
import type { Queryable } from '../../src/db/client.js';
import { migratedDatabase } from '../helpers/migrated.js';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

t.test('selectBindings looks blocks up by key however many the platform holds', async (t) => {
  const { sql } = await migratedDatabase(t);
  const [tenant] = await sql<{ id: string }[]>`insert into tenants (name) values ('plan') returning id`;
  const [device] = await sql<{ id: string }[]>`insert into entities (kind, name, tenant_id) values ('device', 'd', ${tenant!.id}) returning id`;
  const [role] = await sql<{ id: string }[]>`insert into roles (name, tenant_id) values ('r', ${tenant!.id}) returning id`;
  await sql`insert into permission_blocks (tenant_id, scope_mode) select ${tenant!.id}, 'tenant' from generate_series(1, 20000)`;
  await sql`insert into role_permission_blocks (role_id, block_id) select ${role!.id}, id from permission_blocks where tenant_id = ${tenant!.id} limit 200`;
  await sql`insert into permission_block_actions (block_id, action_id)
            select rpb.block_id, a.id from role_permission_blocks rpb, actions a where rpb.role_id = ${role!.id} and a.name = 'publish'`;
  await sql`insert into role_assignments (tenant_id, subject_kind, entity_id, role_id) values (${tenant!.id}, 'entity', ${device!.id}, ${role!.id})`;
  await sql`analyze`;

  const rows = await selectBindings(sql as unknown as Queryable, device!.id);
  t.equal(rows.length, 200, 'every held block');
  t.same(rows[0]!.actions, ['publish']);

  // The same statement, explained: a tag that sends selectBindings' text with EXPLAIN in front.
  let plan: PlanNode | undefined;
  const explaining = (async (strings: TemplateStringsArray, ...values: unknown[]) => {
    const text = strings.reduce((acc, s, i) => `${acc}$${i}${s}`);
    const [row] = await sql.unsafe(`explain (format json) ${text}`, values as never[]);
    plan = (row!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
    return [];
  }) as unknown as Queryable;
  await selectBindings(explaining, device!.id);
  const scans = nodesOf(plan!).filter((n) => n['Relation Name'] === 'permission_blocks').map((n) => n['Node Type']);
  t.ok(scans.length > 0, 'the plan reads permission_blocks');
  t.notOk(scans.includes('Seq Scan'), `permission_blocks reached by ${scans.join(', ')}`);
});
