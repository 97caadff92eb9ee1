-- Tenant aliases are now cached (the runtime credential check resolves tenant_alias selectors from memory,
-- src/auth/tenant-states.ts): a renamed alias must drop what every instance holds, as a status change does.
create or replace function tenants__notify_changed() returns trigger language plpgsql as $$
begin
  if tg_op = 'DELETE' then
    perform auth_notify_invalidate('tenants', old.id);
  elsif new.status is distinct from old.status or new.deleted_at is distinct from old.deleted_at
     or new.alias is distinct from old.alias then
    perform auth_notify_invalidate('tenants', new.id);
  end if;
  return null;
end $$;
