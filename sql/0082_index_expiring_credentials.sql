-- expiringCredentials (issue 22): active credentials by expiry, soonest first.
create index credentials__active_expiry on credentials (expires_at, id) where status = 'active' and expires_at is not null;
