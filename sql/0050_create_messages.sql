-- Device messages: resolved SenML records (RFC 8428) as published over HTTP, MQTT or CoAP. Append-only,
-- range-partitioned by receive time (one partition per UTC day, created ahead by the messaging maintenance
-- task) so retention drops whole partitions instead of deleting rows. The DEFAULT partition catches rows
-- for a day whose partition does not exist yet, so an insert is never refused for lack of a partition.
-- No foreign keys: checking three references per row would cost more than the insert itself, and the
-- publish path has verified the workspace, channel and publisher already.
create table messages (
  received_at timestamptz not null default now(),
  -- seconds since the epoch: bt + t, as SenML carries it (fractional, may precede received_at)
  time double precision not null,
  value double precision,
  sum double precision,
  update_time double precision,
  workspace_id uuid not null,
  channel_id uuid not null,
  publisher_id uuid not null,
  bool_value boolean,
  protocol text not null constraint messages__protocol check (protocol in ('http', 'mqtt', 'coap')),
  subtopic text,
  name text not null,
  unit text,
  string_value text,
  data_value text
) partition by range (received_at);

-- The reader's page: one channel, newest measurement first.
create index messages__channel_time on messages (channel_id, time desc);

create table messages_default partition of messages default;

-- Exact unfiltered totals per channel without counting a million index entries on every read: one row
-- per (channel, partition day), kept by a statement-level trigger in the same statement as the insert,
-- and deleted with the partition it counts.
create table message_counts (
  channel_id uuid not null,
  day date not null,
  messages bigint not null,
  primary key (channel_id, day)
);

create function message_counts__apply() returns trigger language plpgsql as $$
begin
  insert into message_counts (channel_id, day, messages)
  select channel_id, (received_at at time zone 'UTC')::date, count(*) from new_rows group by 1, 2
  -- a fixed order, so two writers upserting the same channels lock them in the same order (no deadlock)
  order by 1, 2
  on conflict (channel_id, day) do update set messages = message_counts.messages + excluded.messages;
  return null;
end $$;

create trigger message_counts__insert after insert on messages
  referencing new table as new_rows for each statement execute function message_counts__apply();
