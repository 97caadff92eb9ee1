-- Lifecycle sweeper (issue 27): the expiry notices written, one row per certificate and event. The primary
-- key is what makes certificate.expiring and certificate.authority_expiring exactly-once across restarts
-- and instances: the notice row and its outbox record commit together, or neither does.
create table certificate_lifecycle_notices (
  subject_id uuid not null,
  event text not null constraint certificate_lifecycle_notices__event check (event in ('certificate.expiring', 'certificate.authority_expiring')),
  not_after timestamptz not null,
  created_at timestamptz not null default now(),
  constraint certificate_lifecycle_notices_pkey primary key (subject_id, event)
);

