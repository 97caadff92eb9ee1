-- The access model: actions and where they apply, permission blocks (the only holders of scope and
-- actions), roles, role assignments, direct policies and guardrail rules.

create table actions (
  id uuid primary key default gen_random_uuid(),
  -- global names only: words joined by '.' or '_', never an object id or an object-specific suffix
  name text not null constraint actions__name_format check (name ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$' and length(name) <= 64),
  description text,
  is_system boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz
);
create unique index actions__name on actions (name);

-- Object kinds and types as SPEC.md defines them: object_type is '<kind>:<sub-kind>' or null.
create domain object_kind as text check (value in (
  'entity', 'resource', 'group', 'tenant', 'role', 'policy', 'credential', 'api_endpoint', 'audit_log', 'signing_key'));
create domain object_type as text check (value ~ '^[a-z_]+:[a-z0-9][a-z0-9_.-]*$');

-- Validates which actions may be granted on which objects; never grants anything by itself.
create table action_applicability (
  id uuid primary key default gen_random_uuid(),
  action_id uuid not null references actions (id) on delete cascade,
  object_kind object_kind not null,
  -- null: every sub-kind of object_kind
  object_type object_type,
  created_at timestamptz not null default now(),
  constraint action_applicability__type_matches_kind check (object_type is null or split_part(object_type, ':', 1) = object_kind)
);
create unique index action_applicability__action_kind_type on action_applicability (action_id, object_kind, object_type) nulls not distinct;
create index action_applicability__kind on action_applicability (object_kind, object_type);

create table permission_blocks (
  id uuid primary key default gen_random_uuid(),
  -- the tenant boundary: null only for platform-wide blocks
  tenant_id uuid references tenants (id) on delete cascade,
  scope_mode text not null constraint permission_blocks__scope_mode check (scope_mode in (
    'platform', 'tenant', 'object_kind', 'object_type', 'object',
    'group', 'group_direct_objects', 'group_descendant_objects', 'group_child_groups', 'group_descendant_groups')),
  object_kind object_kind,
  object_type object_type,
  object_id uuid,
  group_id uuid references groups (id) on delete cascade,
  effect text not null default 'allow' constraint permission_blocks__effect check (effect in ('allow', 'deny')),
  conditions jsonb not null default '{}'::jsonb constraint permission_blocks__conditions_object check (jsonb_typeof(conditions) = 'object'),
  -- system blocks (the platform administrator's) cover every action, including ones added later
  all_actions boolean not null default false,
  created_by uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  constraint permission_blocks__group_scope_needs_tenant check (
    scope_mode not like 'group%' or (tenant_id is not null and group_id is not null)),
  constraint permission_blocks__platform_shape check (
    scope_mode <> 'platform' or (tenant_id is null and object_kind is null and object_type is null and object_id is null and group_id is null)),
  constraint permission_blocks__tenant_shape check (
    scope_mode <> 'tenant' or (tenant_id is not null and object_kind is null and object_type is null and object_id is null and group_id is null)),
  constraint permission_blocks__object_kind_shape check (
    scope_mode <> 'object_kind' or (object_kind is not null and object_type is null and object_id is null and group_id is null)),
  constraint permission_blocks__object_type_shape check (
    scope_mode <> 'object_type' or (object_kind is not null and object_type is not null and object_id is null and group_id is null)),
  constraint permission_blocks__object_shape check (
    scope_mode <> 'object' or (object_kind is not null and object_id is not null and group_id is null)),
  constraint permission_blocks__group_objects_shape check (
    scope_mode not in ('group_direct_objects', 'group_descendant_objects') or object_kind in ('entity', 'resource')),
  constraint permission_blocks__type_matches_kind check (object_type is null or split_part(object_type, ':', 1) = object_kind)
);
create index permission_blocks__tenant on permission_blocks (tenant_id, scope_mode);
create index permission_blocks__object on permission_blocks (object_id) where object_id is not null;
create index permission_blocks__group on permission_blocks (group_id) where group_id is not null;

create table permission_block_actions (
  block_id uuid not null references permission_blocks (id) on delete cascade,
  action_id uuid not null references actions (id) on delete cascade,
  primary key (block_id, action_id)
);
create index permission_block_actions__action on permission_block_actions (action_id);

create table roles (
  id uuid primary key default gen_random_uuid(),
  name text not null constraint roles__name_not_blank check (btrim(name) <> ''),
  -- null: a platform role (needs platform administration to create)
  tenant_id uuid references tenants (id) on delete cascade,
  description text,
  is_system boolean not null default false,
  created_by uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  deleted_at timestamptz,
  deleted_by uuid
);
create unique index roles__tenant_name_live on roles (tenant_id, name) nulls not distinct where deleted_at is null;

create table role_permission_blocks (
  role_id uuid not null references roles (id) on delete cascade,
  block_id uuid not null references permission_blocks (id) on delete cascade,
  primary key (role_id, block_id)
);
create index role_permission_blocks__block on role_permission_blocks (block_id);

-- Subject → role. No scope of its own; tenant_id is stored (null for platform/system assignments).
create table role_assignments (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid references tenants (id) on delete cascade,
  subject_kind text not null constraint role_assignments__subject_kind check (subject_kind in ('entity', 'group')),
  entity_id uuid references entities (id) on delete cascade,
  group_id uuid references groups (id) on delete cascade,
  role_id uuid not null references roles (id) on delete cascade,
  created_by uuid,
  created_at timestamptz not null default now(),
  constraint role_assignments__one_subject check (
    (subject_kind = 'entity' and entity_id is not null and group_id is null)
    or (subject_kind = 'group' and group_id is not null and entity_id is null))
);
create unique index role_assignments__subject_role on role_assignments (coalesce(entity_id, group_id), role_id, tenant_id) nulls not distinct;
create index role_assignments__entity on role_assignments (entity_id) where entity_id is not null;
create index role_assignments__group on role_assignments (group_id) where group_id is not null;
create index role_assignments__role on role_assignments (role_id);
create index role_assignments__tenant on role_assignments (tenant_id);

-- Subject → one permission block; created only by trusted flows, always audited.
create table direct_policies (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid references tenants (id) on delete cascade,
  subject_kind text not null constraint direct_policies__subject_kind check (subject_kind in ('entity', 'group')),
  entity_id uuid references entities (id) on delete cascade,
  group_id uuid references groups (id) on delete cascade,
  block_id uuid not null references permission_blocks (id) on delete cascade,
  created_by uuid,
  created_at timestamptz not null default now(),
  constraint direct_policies__one_subject check (
    (subject_kind = 'entity' and entity_id is not null and group_id is null)
    or (subject_kind = 'group' and group_id is not null and entity_id is null))
);
create unique index direct_policies__subject_block on direct_policies (coalesce(entity_id, group_id), block_id);
create index direct_policies__entity on direct_policies (entity_id) where entity_id is not null;
create index direct_policies__group on direct_policies (group_id) where group_id is not null;
create index direct_policies__block on direct_policies (block_id);
create index direct_policies__tenant on direct_policies (tenant_id);

-- Guardrails: which entity kinds may receive which actions on which objects (SPEC.md column list).
create table action_assignment_rules (
  id uuid primary key default gen_random_uuid(),
  -- null: a global rule
  tenant_id uuid references tenants (id) on delete cascade,
  entity_kind text not null constraint action_assignment_rules__entity_kind check (
    entity_kind in ('human', 'device', 'service', 'workload', 'application')),
  action_name text not null,
  object_kind object_kind not null,
  -- null: every sub-kind
  object_type object_type,
  decision text not null constraint action_assignment_rules__decision check (decision in ('allow', 'deny', 'require_override')),
  is_absolute boolean not null default false,
  created_at timestamptz not null default now(),
  constraint action_assignment_rules__absolute_global_only check (not is_absolute or tenant_id is null)
);
create unique index action_assignment_rules__key on action_assignment_rules (
  tenant_id, entity_kind, action_name, object_kind, object_type, decision) nulls not distinct;
create index action_assignment_rules__lookup on action_assignment_rules (entity_kind, action_name, object_kind);

-- Seeded global actions and their valid object pairs (SPEC.md "Access model records").
insert into actions (name, description, is_system) values
  ('read', 'read an object', true),
  ('create', 'create objects (tenant lifecycle)', true),
  ('write', 'change an object', true),
  ('delete', 'delete an object', true),
  ('revoke', 'revoke a credential', true),
  ('rotate', 'rotate a credential or signing key', true),
  ('publish', 'publish messages to a channel', true),
  ('subscribe', 'receive messages of a channel', true),
  ('execute', 'run a rule, report or custom endpoint', true),
  ('manage', 'administer an object and what it contains', true),
  ('policy.manage', 'manage permission blocks, assignments and direct policies', true),
  ('role.manage', 'manage roles', true),
  ('authz.check', 'ask the authorization engine about other subjects', true),
  ('pki.provision', 'provision and retire a tenant certificate authority', true),
  ('pki.provision_automated', 'provision tenant authorities automatically', true);

insert into action_applicability (action_id, object_kind, object_type)
select a.id, p.kind::object_kind, p.type::object_type
from (values
  ('read', 'entity', null), ('write', 'entity', null), ('delete', 'entity', null),
  ('read', 'resource', null), ('write', 'resource', null), ('delete', 'resource', null),
  ('read', 'group', null), ('write', 'group', null), ('delete', 'group', null),
  ('manage', 'tenant', null), ('manage', 'entity', null), ('manage', 'resource', null), ('manage', 'group', null),
  ('role.manage', 'tenant', null), ('role.manage', 'entity', null), ('role.manage', 'resource', null),
  ('role.manage', 'group', null), ('role.manage', 'role', null),
  ('policy.manage', 'tenant', null), ('policy.manage', 'entity', null), ('policy.manage', 'resource', null),
  ('policy.manage', 'group', null), ('policy.manage', 'policy', null),
  ('read', 'credential', null), ('manage', 'credential', null), ('rotate', 'credential', null), ('revoke', 'credential', null),
  ('read', 'audit_log', null),
  ('read', 'tenant', null), ('create', 'tenant', null),
  ('rotate', 'signing_key', null), ('read', 'signing_key', null), ('manage', 'signing_key', null),
  ('publish', 'resource', 'resource:channel'), ('subscribe', 'resource', 'resource:channel'),
  ('execute', 'resource', 'resource:rule'), ('execute', 'resource', 'resource:report'),
  ('read', 'api_endpoint', null), ('execute', 'api_endpoint', null), ('manage', 'api_endpoint', null),
  ('read', 'role', null), ('read', 'policy', null),
  ('authz.check', 'tenant', null),
  ('pki.provision', 'tenant', null), ('pki.provision_automated', 'tenant', null)
) as p(action, kind, type)
join actions a on a.name = p.action;
