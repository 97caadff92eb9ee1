-- Tenants (workspaces), entities (every principal), resources (protected objects such as channels),
-- groups (object groups nest; principal groups are flat policy subjects) and their memberships.

create table tenants (
  id uuid primary key default gen_random_uuid(),
  name text not null constraint tenants__name_not_blank check (btrim(name) <> ''),
  alias text constraint tenants__alias_format check (
    alias ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
    and alias !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  status text not null default 'active'
    constraint tenants__status check (status in ('active', 'inactive', 'frozen', 'deleted')),
  tags text[] not null default '{}',
  attributes jsonb not null default '{}'::jsonb constraint tenants__attributes_object check (jsonb_typeof(attributes) = 'object'),
  created_by uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  deleted_at timestamptz,
  deleted_by uuid,
  constraint tenants__deleted_status check ((deleted_at is null) = (status <> 'deleted'))
);
create unique index tenants__name_live on tenants (name) where deleted_at is null;
create unique index tenants__alias_live on tenants (lower(alias)) where deleted_at is null and alias is not null;
create index tenants__created_at on tenants (created_at, id);

create table entities (
  id uuid primary key default gen_random_uuid(),
  kind text not null constraint entities__kind check (kind in ('human', 'device', 'service', 'workload', 'application')),
  name text not null constraint entities__name_not_blank check (btrim(name) <> ''),
  external_id text constraint entities__external_id_trimmed check (external_id = btrim(external_id) and external_id <> ''),
  alias text constraint entities__alias_format check (
    alias ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
    and alias !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  -- owning (home) tenant; null = global (humans, platform services)
  tenant_id uuid references tenants (id) on delete cascade,
  profile_id uuid,
  profile_version_id uuid,
  status text not null default 'active' constraint entities__status check (status in ('active', 'inactive', 'suspended')),
  attributes jsonb not null default '{}'::jsonb constraint entities__attributes_object check (jsonb_typeof(attributes) = 'object'),
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  deleted_at timestamptz,
  deleted_by uuid
);
create unique index entities__tenant_name_live on entities (tenant_id, name) nulls not distinct where deleted_at is null;
create unique index entities__tenant_external_id_live on entities (tenant_id, external_id) nulls not distinct
  where deleted_at is null and external_id is not null;
create unique index entities__tenant_alias_live on entities (tenant_id, lower(alias)) nulls not distinct
  where deleted_at is null and alias is not null;
create index entities__tenant_created_at on entities (tenant_id, created_at, id);
create index entities__tenant_kind on entities (tenant_id, kind);
create index entities__profile on entities (profile_id) where profile_id is not null;
create index entities__attributes on entities using gin (attributes jsonb_path_ops);

-- A human's login identifier; lowercased, unique, not a field of the entity.
create table entity_emails (
  entity_id uuid primary key references entities (id) on delete cascade,
  email text not null constraint entity_emails__lowercase check (email = lower(email) and email like '%_@_%'),
  verified_at timestamptz,
  created_at timestamptz not null default now()
);
create unique index entity_emails__email on entity_emails (email);

create table resources (
  id uuid primary key default gen_random_uuid(),
  kind text not null constraint resources__kind_format check (kind ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
  name text not null constraint resources__name_not_blank check (btrim(name) <> ''),
  alias text constraint resources__alias_format check (
    alias ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'
    and alias !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  tenant_id uuid references tenants (id) on delete cascade,
  owner_id uuid references entities (id) on delete set null,
  attributes jsonb not null default '{}'::jsonb constraint resources__attributes_object check (jsonb_typeof(attributes) = 'object'),
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  deleted_at timestamptz,
  deleted_by uuid
);
create unique index resources__tenant_alias_live on resources (tenant_id, lower(alias)) nulls not distinct
  where deleted_at is null and alias is not null;
create index resources__tenant_created_at on resources (tenant_id, created_at, id);
create index resources__tenant_kind on resources (tenant_id, kind);
create index resources__attributes on resources using gin (attributes jsonb_path_ops);

create table groups (
  id uuid primary key default gen_random_uuid(),
  name text not null constraint groups__name_not_blank check (btrim(name) <> ''),
  tenant_id uuid references tenants (id) on delete cascade,
  group_type text not null constraint groups__group_type check (group_type in ('object', 'principal')),
  description text,
  parent_id uuid references groups (id) on delete set null,
  status text not null default 'active' constraint groups__status check (status in ('active', 'inactive', 'suspended')),
  attributes jsonb not null default '{}'::jsonb constraint groups__attributes_object check (jsonb_typeof(attributes) = 'object'),
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  deleted_at timestamptz,
  deleted_by uuid,
  -- object groups are tenant boundaries; principal groups may be platform-wide
  constraint groups__object_group_needs_tenant check (group_type = 'principal' or tenant_id is not null),
  constraint groups__principal_groups_flat check (group_type = 'object' or parent_id is null),
  constraint groups__no_self_parent check (parent_id is distinct from id)
);
create unique index groups__tenant_name_live on groups (tenant_id, name) nulls not distinct where deleted_at is null;
create index groups__tenant_type on groups (tenant_id, group_type, created_at);
create index groups__parent on groups (parent_id) where parent_id is not null;

-- Object-group containment: many-to-many; adding twice is a no-op (primary key + on conflict do nothing).
create table object_group_entities (
  group_id uuid not null references groups (id) on delete cascade,
  entity_id uuid not null references entities (id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (group_id, entity_id)
);
create index object_group_entities__entity on object_group_entities (entity_id);

create table object_group_resources (
  group_id uuid not null references groups (id) on delete cascade,
  resource_id uuid not null references resources (id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (group_id, resource_id)
);
create index object_group_resources__resource on object_group_resources (resource_id);

create table principal_group_members (
  group_id uuid not null references groups (id) on delete cascade,
  entity_id uuid not null references entities (id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (group_id, entity_id)
);
create index principal_group_members__entity on principal_group_members (entity_id);

-- Human participation in a tenant (profile, invitation lifecycle). Not ownership, not a grant.
create table tenant_memberships (
  tenant_id uuid not null references tenants (id) on delete cascade,
  entity_id uuid not null references entities (id) on delete cascade,
  status text not null default 'active'
    constraint tenant_memberships__status check (status in ('active', 'invited', 'suspended', 'left')),
  local_name text,
  attributes jsonb not null default '{}'::jsonb,
  created_at timestamptz not null default now(),
  primary key (tenant_id, entity_id)
);
create index tenant_memberships__entity on tenant_memberships (entity_id);

create table ownerships (
  owner_id uuid not null references entities (id) on delete cascade,
  owned_id uuid not null references entities (id) on delete cascade,
  relation text not null default 'owner',
  created_at timestamptz not null default now(),
  primary key (owner_id, owned_id),
  constraint ownerships__not_self check (owner_id <> owned_id)
);
create index ownerships__owned on ownerships (owned_id);
