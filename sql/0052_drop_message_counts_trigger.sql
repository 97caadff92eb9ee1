-- Per-channel counters are now added by the message writer's own statement (its batch's counts, upserted
-- in a CTE of the same INSERT), not by a statement trigger. The trigger's transition table copied every
-- row into a tuplestore and ran a GROUP BY through SPI: about 1 µs of PostgreSQL per row, for counts the
-- writer already knows. Everything that inserts into messages must add to message_counts in the same
-- statement (src/messaging/queries.ts insertBatch does).
drop trigger message_counts__insert on messages;
drop function message_counts__apply();
