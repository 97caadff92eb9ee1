-- Audit trail: who did what, with which outcome. No foreign keys: entries outlive what they describe.
create table audit_log (
  id uuid primary key default gen_random_uuid(),
  event text not null,
  outcome text not null constraint audit_log__outcome check (outcome in ('allow', 'deny', 'error')),
  actor_entity_id uuid,
  -- null means a platform event
  tenant_id uuid,
  target_kind text,
  target_id text,
  details jsonb not null default '{}'::jsonb,
  request_id text,
  created_at timestamptz not null default now()
);

create index audit_log__created_at on audit_log (created_at desc, id desc);
create index audit_log__tenant_created_at on audit_log (tenant_id, created_at desc);
create index audit_log__actor_created_at on audit_log (actor_entity_id, created_at desc);
create index audit_log__event_created_at on audit_log (event, created_at desc);
