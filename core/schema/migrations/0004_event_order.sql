-- A tree-wide commit order for events. Projections shared by the whole tree
-- (kv) depend on the order of writes across sessions, so a rebuild replays
-- events in gseq order. Rows from before this migration have none and
-- replay first, in session and seq order.
ALTER TABLE events ADD COLUMN gseq INTEGER;
CREATE INDEX events_by_gseq ON events (gseq);
