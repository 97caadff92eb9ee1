-- The certificate query by serial alone (the admin UI's entity credentials view): serials are unique per
-- issuer only (credentials__issuer_serial leads with the issuer), so a lookup without one needs its own index.
create index credentials__certificate_serial on credentials (identifier) where kind = 'certificate';
