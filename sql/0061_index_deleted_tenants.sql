-- Authorization hides what deleted tenants own on every subject reload and object lookup: it reads the
-- deleted tenants first, which without an index is a scan of every tenant. Deleted tenants are few (none,
-- usually), so a partial index of them alone answers at once however many tenants the platform holds.
create index tenants__deleted on tenants (id) where status = 'deleted';
