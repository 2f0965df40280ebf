-- Projection: model steps of a turn. text holds the checkpointed text while
-- the step streams and the whole answer once completed.
CREATE TABLE steps (
  id           TEXT PRIMARY KEY,
  session_id   TEXT    NOT NULL,
  prompt_id    TEXT    NOT NULL,
  execution_id TEXT    NOT NULL,
  idx          INTEGER NOT NULL,
  state        TEXT    NOT NULL,
  text         TEXT    NOT NULL DEFAULT '',
  finish       TEXT,
  started_seq  INTEGER NOT NULL
);
CREATE INDEX steps_by_prompt ON steps (prompt_id, idx);

-- Projection: tool calls with their phase (called, authorizing, waiting,
-- executing, settled). ids are minted by revenant, never the provider's.
CREATE TABLE tool_calls (
  id              TEXT PRIMARY KEY,
  session_id      TEXT    NOT NULL,
  step_id         TEXT    NOT NULL,
  idx             INTEGER NOT NULL,
  name            TEXT    NOT NULL,
  arguments       TEXT    NOT NULL,
  phase           TEXT    NOT NULL,
  idempotency_key TEXT,
  outcome         TEXT,
  output          TEXT,
  ran             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tool_calls_by_step ON tool_calls (step_id, idx);

-- The transcript also holds assistant answers (with their tool calls) and
-- tool results, so the next model request is read from one table in order.
ALTER TABLE messages ADD COLUMN tool_calls TEXT;
ALTER TABLE messages ADD COLUMN tool_call_id TEXT;
ALTER TABLE messages ADD COLUMN name TEXT;
