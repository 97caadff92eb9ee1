-- Outbox relay (issue 27): a delivery order (seq, assigned at insert), the delivery state of each record
-- (delivered_at once every configured sink took it; attempts, next_attempt_at and last_error while a sink
-- refuses), and indexes for the relay's two scans: pending in order, delivered by age for pruning.
alter table event_outbox
  add column seq bigint generated always as identity,
  add column delivered_at timestamptz,
  add column attempts int not null default 0,
  add column next_attempt_at timestamptz,
  add column last_error text;

create unique index event_outbox__seq on event_outbox (seq);
create index event_outbox__pending on event_outbox (seq) where delivered_at is null;
create index event_outbox__delivered on event_outbox (delivered_at) where delivered_at is not null;
