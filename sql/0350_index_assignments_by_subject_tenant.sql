-- A subject's grants in one tenant (authz part reloads: selectGrantsInTenants) are found by (entity,
-- tenant): with the entity index alone, reading an operator's grants in the tenant it just created walked
-- every assignment it holds in every tenant it created before.
create index role_assignments__entity_tenant on role_assignments (entity_id, tenant_id) where entity_id is not null;
create index direct_policies__entity_tenant on direct_policies (entity_id, tenant_id) where entity_id is not null;
