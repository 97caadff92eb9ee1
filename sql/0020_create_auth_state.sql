-- Authentication state beside the credentials: the keyed-hash secret for tokens and device keys,
-- failed-login counters shared by every instance, email verification tokens, and triggers that tell
-- every instance's verified-token cache when a session, credential, entity or tenant changed.

-- Service-wide secret material other than JWT signing keys (today: the HMAC key of token hashes).
-- AES-256-GCM under SVC_KEY_ENCRYPTION_KEY when storage_mode = 'encrypted'.
create table auth_keys (
  name text primary key,
  material bytea not null,
  storage_mode text not null constraint auth_keys__storage_mode check (storage_mode in ('encrypted', 'plaintext')),
  key_encryption_key_id text,
  created_at timestamptz not null default now(),
  constraint auth_keys__encrypted_has_kek check (storage_mode = 'plaintext' or key_encryption_key_id is not null)
);

-- Failed logins per identifier ('id:<lowercased identifier>') and per client address ('ip:<prefix>'),
-- in fixed windows, so the limit holds across instances.
create table auth_login_failures (
  key text primary key,
  failures int not null,
  window_started_at timestamptz not null
);
create index auth_login_failures__window on auth_login_failures (window_started_at);

create table email_verification_tokens (
  -- keyed hash of the token mailed to the user; the token itself is never stored
  token_hash text primary key,
  entity_id uuid not null references entities (id) on delete cascade,
  email text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);
create index email_verification_tokens__entity on email_verification_tokens (entity_id);

create index credentials__access_token_entity on credentials (entity_id, created_at, id) where kind = 'access_token';

-- Cache coherence: the payload is the notify hub's envelope {t, p} on its channel (src/db/notify-hub.ts).
create function auth_notify_invalidate(what text, id uuid) returns void language sql as $$
  select pg_notify('svc_events', json_build_object('t', 'auth.invalidate', 'p', json_build_object(what, json_build_array(id)))::text)
$$;

create function sessions__notify_revoked() returns trigger language plpgsql as $$
begin
  if new.revoked_at is not null and old.revoked_at is null then
    perform auth_notify_invalidate('sessions', new.id);
  end if;
  return null;
end $$;
create trigger sessions__notify_revoked after update of revoked_at on sessions
  for each row execute function sessions__notify_revoked();

create function credentials__notify_changed() returns trigger language plpgsql as $$
begin
  if tg_op = 'DELETE' then
    perform auth_notify_invalidate('credentials', old.id);
  elsif new.status is distinct from old.status or new.expires_at is distinct from old.expires_at
     or new.secret_hash is distinct from old.secret_hash or new.scoped is distinct from old.scoped then
    perform auth_notify_invalidate('credentials', new.id);
  end if;
  return null;
end $$;
create trigger credentials__notify_changed after update or delete on credentials
  for each row execute function credentials__notify_changed();

create function entities__notify_changed() returns trigger language plpgsql as $$
begin
  if tg_op = 'DELETE' then
    perform auth_notify_invalidate('entities', old.id);
  elsif new.status is distinct from old.status or new.deleted_at is distinct from old.deleted_at
     or new.tenant_id is distinct from old.tenant_id or new.kind is distinct from old.kind then
    perform auth_notify_invalidate('entities', new.id);
  end if;
  return null;
end $$;
create trigger entities__notify_changed after update or delete on entities
  for each row execute function entities__notify_changed();

create function tenants__notify_changed() returns trigger language plpgsql as $$
begin
  if tg_op = 'DELETE' then
    perform auth_notify_invalidate('tenants', old.id);
  elsif new.status is distinct from old.status or new.deleted_at is distinct from old.deleted_at then
    perform auth_notify_invalidate('tenants', new.id);
  end if;
  return null;
end $$;
create trigger tenants__notify_changed after update or delete on tenants
  for each row execute function tenants__notify_changed();
