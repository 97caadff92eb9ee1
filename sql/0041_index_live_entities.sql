-- Default listings read live rows of one tenant in creation order: a partial index on live rows serves
-- the page in index order.
create index entities__tenant_live_created_at on entities (tenant_id, created_at, id) where deleted_at is null;
create index resources__tenant_live_created_at on resources (tenant_id, created_at, id) where deleted_at is null;

-- The unfiltered total of a tenant's live entities, kept in the same transaction as every change, so a
-- fleet of 100k devices is counted in O(1) instead of scanning it on every page. Global entities
-- (tenant_id null) count under the nil UUID.
create table entity_counts (
  tenant_id uuid primary key,
  live bigint not null default 0 constraint entity_counts__live_not_negative check (live >= 0)
);

create function entity_counts__apply() returns trigger language plpgsql as $$
declare
  nil constant uuid := '00000000-0000-0000-0000-000000000000';
begin
  if tg_op in ('UPDATE', 'DELETE') and old.deleted_at is null then
    update entity_counts set live = live - 1 where tenant_id = coalesce(old.tenant_id, nil);
  end if;
  if tg_op in ('INSERT', 'UPDATE') and new.deleted_at is null then
    insert into entity_counts (tenant_id, live) values (coalesce(new.tenant_id, nil), 1)
    on conflict (tenant_id) do update set live = entity_counts.live + 1;
  end if;
  return null;
end $$;

create trigger entity_counts__insert_delete after insert or delete on entities
  for each row execute function entity_counts__apply();
create trigger entity_counts__update after update of deleted_at, tenant_id on entities
  for each row when (old.deleted_at is distinct from new.deleted_at or old.tenant_id is distinct from new.tenant_id)
  execute function entity_counts__apply();

insert into entity_counts (tenant_id, live)
select coalesce(tenant_id, '00000000-0000-0000-0000-000000000000'), count(*) from entities where deleted_at is null group by 1;
