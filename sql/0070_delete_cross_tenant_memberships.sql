-- Issue 21 point 1: addTenantMember let a tenant admin add another tenant's device or service to its own
-- tenant, with a role. Such rows break the rule every grant now passes through (src/roles/assign.ts): an
-- assignment of a tenant's role reaches only a global entity or one the tenant owns, and so does a
-- membership. Remove what the defect left behind, each removal audited, so no grant it created survives
-- (a role restore would otherwise revive it too).

with stray as (
  delete from role_assignments ra
  using roles r, entities e
  where r.id = ra.role_id and r.tenant_id is not null
    and e.id = ra.entity_id and e.tenant_id is not null and e.tenant_id is distinct from ra.tenant_id
  returning ra.id, ra.tenant_id, ra.entity_id, ra.role_id
)
insert into audit_log (event, outcome, tenant_id, target_kind, target_id, details)
select 'role_assignment.delete', 'allow', tenant_id, 'policy', id::text,
  jsonb_build_object('subject_kind', 'entity', 'subject_id', entity_id, 'role_id', role_id,
    'reason', 'cross-tenant assignment removed by migration 0070 (issue 21)')
from stray;

with stray as (
  delete from tenant_memberships m
  using entities e
  where e.id = m.entity_id and e.tenant_id is not null and e.tenant_id <> m.tenant_id
  returning m.tenant_id, m.entity_id
)
insert into audit_log (event, outcome, tenant_id, target_kind, target_id, details)
select 'tenant_member.remove', 'allow', tenant_id, 'entity', entity_id::text,
  jsonb_build_object('reason', 'membership of another tenant''s entity removed by migration 0070 (issue 21)')
from stray;
