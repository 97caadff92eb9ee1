-- A permission block can name a policy object by id (scope 'object', object_kind 'policy'): a direct
-- policy, a role assignment or another permission block. object_id has no foreign key (it names objects
-- of every kind), so deleting the named row left the block behind, still linked to roles and direct
-- policies: a grant on a vanished object (INTERFACES.md section 6, last bullet). Whatever deletes such a
-- row (a mutation, a purge, a cascade from a tenant, role or block) now deletes the blocks naming it,
-- which cascades on to the links and direct policies holding them and may fire this again (each step
-- removes rows, so it ends).
--
-- Instances cache grants compiled from blocks: the removed block ids go out as the authz cache
-- invalidation the service itself sends (src/authz/service.ts INVALIDATE_TOPIC on the channel of
-- src/db/notify-hub.ts), delivered at commit; a long list degrades to "drop everything", as the hub does.
create function permission_blocks__drop_targeting_policy() returns trigger language plpgsql as $$
declare
  gone uuid[];
  payload jsonb;
begin
  with removed as (
    delete from permission_blocks where object_kind = 'policy' and object_id = old.id returning id
  ) select array_agg(id) into gone from removed;
  if gone is not null then
    payload := case when cardinality(gone) > 100 then jsonb_build_object('all', true)
      else jsonb_build_object('change', jsonb_build_object('kind', 'blocks', 'blockIds', to_jsonb(gone))) end;
    perform pg_notify('svc_events', jsonb_build_object('t', 'authz.invalidate', 'p', payload)::text);
  end if;
  return null;
end $$;

create trigger direct_policies__drop_targeting_blocks after delete on direct_policies
  for each row execute function permission_blocks__drop_targeting_policy();
create trigger role_assignments__drop_targeting_blocks after delete on role_assignments
  for each row execute function permission_blocks__drop_targeting_policy();
create trigger permission_blocks__drop_targeting_blocks after delete on permission_blocks
  for each row execute function permission_blocks__drop_targeting_policy();

-- Blocks already left behind by earlier deletions.
delete from permission_blocks b
where b.object_kind = 'policy' and b.object_id is not null
  and not exists (select 1 from direct_policies d where d.id = b.object_id)
  and not exists (select 1 from role_assignments a where a.id = b.object_id)
  and not exists (select 1 from permission_blocks t where t.id = b.object_id);
