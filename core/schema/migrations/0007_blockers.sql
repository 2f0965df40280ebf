-- Projection: blockers, the questions (and, later, permission requests) a
-- tool call waits on (DESIGN §9). Rows are inserted by
-- session.step.parked@1 and resolved by the kind's answered / cancelled
-- events; nothing else writes them, so a rebuild from the log yields the
-- same rows. id is deterministic from the minted call id and the ordinal
-- (q-<call id>-<n>), so a resumed or rebuilt instance finds the same ids.
CREATE TABLE blockers (
  id          TEXT PRIMARY KEY,
  session_id  TEXT    NOT NULL,
  root_id     TEXT    NOT NULL,
  prompt_id   TEXT    NOT NULL,
  step_id     TEXT    NOT NULL,
  call_id     TEXT    NOT NULL,
  kind        TEXT    NOT NULL,  -- question (permission: added later)
  adapter     TEXT    NOT NULL,  -- the continuation's versioned adapter, question@1
  ordinal     INTEGER NOT NULL,
  state       TEXT    NOT NULL,  -- pending, answered, cancelled
  request     TEXT    NOT NULL,  -- JSON: what is asked
  response_id TEXT,              -- the winning reply's id (NULL for a cancellation by an interrupt)
  reply       TEXT,              -- JSON: the winning reply
  reason      TEXT,              -- cancelled: why
  created_seq INTEGER NOT NULL,
  created_at  INTEGER NOT NULL,
  resolved_at INTEGER
);
CREATE INDEX blockers_by_session ON blockers (session_id, state);
CREATE INDEX blockers_by_root ON blockers (root_id, state);
CREATE INDEX blockers_by_step ON blockers (step_id, state);
