-- Cluster node registry: one row per running instance, kept alive by its heartbeat. Leadership is not a
-- column: it is the PostgreSQL advisory lock held by one node's dedicated connection, whose backend pid
-- the node records here so that anyone can see, from pg_locks, which node holds it.
create table broker_nodes (
  id uuid primary key,
  address text not null constraint broker_nodes__address_length check (char_length(address) between 1 and 512),
  started_at timestamptz not null,
  heartbeat_at timestamptz not null default now(),
  lock_pid integer
);

-- Pruning and the healthy filter read by heartbeat age.
create index broker_nodes__heartbeat_at on broker_nodes (heartbeat_at);
