-- Projection: whether a sub-agent's job runs in the background, decided
-- once, when its child starts: session.job.started@1 carries it, and the
-- jobs row keeps it. Nothing reads it again from the call's arguments,
-- which two JSON readers (Go's case-insensitive, last-duplicate-wins
-- decoder and SQLite's exact, first-duplicate json_extract) can read
-- differently. Existing rows are filled from the event that started them,
-- as a rebuild from the log would (a false flag is omitted there).
ALTER TABLE jobs ADD COLUMN background INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET background = COALESCE((SELECT json_extract(e.data, '$.background') FROM events e
  WHERE e.session_id = jobs.parent_id AND e.type = 'session.job.started@1'
  AND json_extract(e.data, '$.child_id') = jobs.child_id), 0) = 1;

-- A waiting call's blockers are read by call (CallBlockers, resolveTask),
-- and a task blocker by the child it waits for (the claim query): child_id
-- is its request's child_id, kept in a column so that query reads no JSON.
ALTER TABLE blockers ADD COLUMN child_id TEXT;
UPDATE blockers SET child_id = json_extract(request, '$.child_id') WHERE kind = 'task';
CREATE INDEX blockers_by_call ON blockers (call_id);
CREATE INDEX blockers_by_child ON blockers (child_id, state) WHERE child_id IS NOT NULL;
