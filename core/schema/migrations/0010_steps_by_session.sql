-- A snapshot and a page of messages list the session's steps still
-- streaming (state 'started'): without an index that read every step
-- the tree ever had, each with its whole answer (20,000 steps of 2 KB:
-- 110 ms a snapshot, holding the tree's connection; BenchmarkSnapshotOfALongSession).
CREATE INDEX steps_by_session ON steps (session_id, state, started_seq);
