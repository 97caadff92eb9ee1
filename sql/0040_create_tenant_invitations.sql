-- Invitations into a tenant, by user id or by email; an emailed invitation carries a one-time token.
create table tenant_invitations (
  id uuid primary key default gen_random_uuid(),
  tenant_id uuid not null references tenants (id) on delete cascade,
  invitee_user_id uuid references entities (id) on delete cascade,
  invitee_email text constraint tenant_invitations__email_lowercase check (invitee_email = lower(invitee_email)),
  role_id uuid references roles (id) on delete set null,
  invited_by uuid references entities (id) on delete set null,
  -- sha256 of the emailed token; the token itself is never stored
  token_hash text,
  redirect_url text,
  state text not null default 'pending'
    constraint tenant_invitations__state check (state in ('pending', 'accepted', 'rejected', 'revoked')),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  rejected_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz,
  constraint tenant_invitations__invitee check (invitee_user_id is not null or invitee_email is not null)
);
create unique index tenant_invitations__tenant_user_pending on tenant_invitations (tenant_id, invitee_user_id)
  where state = 'pending' and invitee_user_id is not null;
create unique index tenant_invitations__tenant_email_pending on tenant_invitations (tenant_id, invitee_email)
  where state = 'pending' and invitee_email is not null;
create unique index tenant_invitations__token_hash on tenant_invitations (token_hash) where token_hash is not null;
create index tenant_invitations__invitee_user on tenant_invitations (invitee_user_id) where invitee_user_id is not null;
create index tenant_invitations__invitee_email on tenant_invitations (invitee_email) where invitee_email is not null;
