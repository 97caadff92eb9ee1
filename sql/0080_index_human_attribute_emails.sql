-- Login by the address a human created through createEntity holds in attributes.email (issue 22): looked
-- up lowercased and trimmed among live humans, so the lookup is an index probe, not a scan of entities.
create index entities__human_attribute_email on entities (lower(btrim(attributes->>'email')))
  where kind = 'human' and deleted_at is null;
