-- The reader's index, ascending in time; the reader's newest-first page is the same scan read backwards.
-- Publishes arrive in time order. Descending, each new entry went to the front of its channel's run, and
-- a busy channel's leaf splits left half-empty pages behind that nothing would fill again; ascending, it
-- goes to the end of the run and PostgreSQL's split keeps the pages behind it full. Measured with one
-- channel taking batch after batch: 1435 index pages for 288,000 rows instead of 2578, and about 0.8 µs
-- less PostgreSQL CPU per row; with a hundred channels taking turns both orders come out the same.
drop index messages__channel_time;
create index messages__channel_time on messages (channel_id, time);
