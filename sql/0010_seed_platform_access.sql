-- The platform's built-in principals and grants (INTERFACES.md section 5): the first administrator,
-- its platform role, and the group every human joins, which lets humans create tenants.
-- The administrator's password is set at boot from SVC_ADMIN_SECRET (or generated), never here.

insert into entities (id, kind, name, status, attributes)
values ('00000000-0000-0000-0000-000000000001', 'human', 'admin', 'active', '{"system": true}');

-- svc-admin: every action at platform scope, including actions added later.
insert into roles (id, name, tenant_id, description, is_system)
values ('00000000-0000-0000-0000-000000000002', 'svc-admin', null, 'Platform administration: every action at platform scope', true);
insert into permission_blocks (id, tenant_id, scope_mode, effect, all_actions)
values ('00000000-0000-0000-0000-0000000000b2', null, 'platform', 'allow', true);
insert into permission_block_actions (block_id, action_id)
select '00000000-0000-0000-0000-0000000000b2', id from actions;
insert into role_permission_blocks (role_id, block_id)
values ('00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-0000000000b2');
insert into role_assignments (tenant_id, subject_kind, entity_id, role_id)
values (null, 'entity', '00000000-0000-0000-0000-000000000001', '00000000-0000-0000-0000-000000000002');

-- authenticated-users: a platform principal group every human joins; it holds domain-creator.
insert into groups (id, name, tenant_id, group_type, description)
values ('00000000-0000-0000-0000-000000000005', 'authenticated-users', null, 'principal', 'Every human account');
insert into roles (id, name, tenant_id, description, is_system)
values ('00000000-0000-0000-0000-000000000006', 'domain-creator', null, 'May create tenants', true);
insert into permission_blocks (id, tenant_id, scope_mode, object_kind, effect)
values ('00000000-0000-0000-0000-0000000000b6', null, 'object_kind', 'tenant', 'allow');
insert into permission_block_actions (block_id, action_id)
select '00000000-0000-0000-0000-0000000000b6', id from actions where name = 'create';
insert into role_permission_blocks (role_id, block_id)
values ('00000000-0000-0000-0000-000000000006', '00000000-0000-0000-0000-0000000000b6');
insert into role_assignments (tenant_id, subject_kind, group_id, role_id)
values (null, 'group', '00000000-0000-0000-0000-000000000005', '00000000-0000-0000-0000-000000000006');
insert into principal_group_members (group_id, entity_id)
values ('00000000-0000-0000-0000-000000000005', '00000000-0000-0000-0000-000000000001');
