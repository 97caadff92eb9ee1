-- Custom API endpoints (SPEC.md "Custom API endpoint"): stored GraphQL operations behind named HTTP
-- routes under /api/custom/, and the log of every call to them.
create table api_endpoints (
  id uuid primary key default gen_random_uuid(),
  -- null: a platform-level endpoint
  tenant_id uuid references tenants (id) on delete cascade,
  key text not null constraint api_endpoints__key_not_blank check (btrim(key) <> ''),
  name text not null constraint api_endpoints__name_not_blank check (btrim(name) <> ''),
  description text,
  method text not null constraint api_endpoints__method check (method in ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')),
  path text not null constraint api_endpoints__path check (
    path like '/api/custom/%' and strpos(path, '//') = 0 and strpos(path, '..') = 0 and strpos(path, '?') = 0 and strpos(path, '#') = 0),
  operation_kind text not null constraint api_endpoints__operation_kind check (operation_kind in ('query', 'mutation')),
  graphql text not null,
  auth_mode text not null default 'caller_context' constraint api_endpoints__auth_mode check (auth_mode in ('caller_context', 'service_context')),
  service_entity_id uuid references entities (id) on delete set null,
  variables_mapping jsonb not null default '{}'::jsonb constraint api_endpoints__variables_mapping_object check (jsonb_typeof(variables_mapping) = 'object'),
  request_schema jsonb not null default '{}'::jsonb constraint api_endpoints__request_schema_object check (jsonb_typeof(request_schema) = 'object'),
  response_mapping jsonb not null default '{}'::jsonb constraint api_endpoints__response_mapping_object check (jsonb_typeof(response_mapping) = 'object'),
  status text not null default 'draft' constraint api_endpoints__status check (status in ('draft', 'active', 'disabled')),
  created_by uuid,
  updated_by uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz
);
-- One key per tenant, and one among platform-level endpoints (null tenant = one bucket).
create unique index api_endpoints__tenant_key on api_endpoints (tenant_id, key) nulls not distinct;
-- Only one active endpoint answers a method and path.
create unique index api_endpoints__method_path_active on api_endpoints (method, path) where status = 'active';
create index api_endpoints__status on api_endpoints (status);

-- Every change reaches every instance's routing table (also changes made outside the service): the
-- NOTIFY is sent at commit, so a reader of the row sees the change.
create function api_endpoints__notify_changed() returns trigger language plpgsql as $$
begin
  perform pg_notify('svc_events', json_build_object('t', 'custom_endpoints.changed',
    'p', json_build_object('id', case when tg_op = 'DELETE' then old.id else new.id end))::text);
  return null;
end $$;
create trigger api_endpoints__notify_changed after insert or update or delete on api_endpoints
  for each row execute function api_endpoints__notify_changed();

-- History of calls, written in batches and read rarely: ids are time-ordered (UUIDv7 layout, made by
-- the writer) so the key grows at its end; summaries are json (kept as written, validated, not decomposed).
-- No foreign keys: a key check per recorded call cost a third of the row's insert; an endpoint's records go
-- with it (tenant purge) through the trigger below, and purging an entity keeps its calls' records.
create table api_endpoint_executions (
  id uuid primary key default gen_random_uuid(),
  -- null: the call named no endpoint (404)
  endpoint_id uuid,
  caller_entity_id uuid,
  status text not null constraint api_endpoint_executions__status check (status in ('success', 'error', 'denied')),
  request_summary json not null default '{}'::json,
  response_summary json not null default '{}'::json,
  error text,
  created_at timestamptz not null default now()
);
create index api_endpoint_executions__endpoint on api_endpoint_executions (endpoint_id, created_at desc, id desc);

create function api_endpoints__drop_executions() returns trigger language plpgsql as $$
begin
  delete from api_endpoint_executions where endpoint_id = old.id;
  return null;
end $$;
create trigger api_endpoints__drop_executions after delete on api_endpoints
  for each row execute function api_endpoints__drop_executions();
