-- Device types: profiles (tenant-owned, or platform-wide with tenant_id null) and their numbered
-- versions, whose JSON Schema validates the attributes of the entities bound to them.
create table profiles (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid references tenants (id) on delete cascade,
  object_kind text not null constraint profiles__object_kind check (object_kind in ('entity', 'resource', 'group', 'tenant', 'credential')),
  -- the sub-kind the profile applies to (for entities: device, human, service, workload, application)
  kind text not null constraint profiles__kind_format check (kind ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
  key text not null constraint profiles__key_format check (key ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
  display_name text not null constraint profiles__display_name_not_blank check (btrim(display_name) <> ''),
  description text,
  status text not null default 'active' constraint profiles__status check (status in ('active', 'deprecated', 'disabled')),
  created_at timestamptz not null default now(),
  updated_at timestamptz
);
create unique index profiles__tenant_kind_key_live on profiles (tenant_id, object_kind, kind, key) nulls not distinct;
create index profiles__tenant on profiles (tenant_id, object_kind, kind);

create table profile_versions (
  id uuid primary key default gen_random_uuid(),
  profile_id uuid not null references profiles (id) on delete cascade,
  version int not null constraint profile_versions__version_positive check (version >= 1),
  json_schema jsonb not null default '{}'::jsonb constraint profile_versions__json_schema_object check (jsonb_typeof(json_schema) = 'object'),
  ui_schema jsonb not null default '{}'::jsonb,
  status text not null default 'draft' constraint profile_versions__status check (status in ('draft', 'active', 'deprecated', 'disabled')),
  created_at timestamptz not null default now(),
  updated_at timestamptz
);
create unique index profile_versions__profile_version on profile_versions (profile_id, version);

alter table entities
  add constraint entities__profile foreign key (profile_id) references profiles (id) on delete restrict,
  add constraint entities__profile_version foreign key (profile_version_id) references profile_versions (id) on delete restrict;
