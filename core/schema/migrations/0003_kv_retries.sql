-- Projection: the tree's key-value store, written only by tool settlements
-- (kv_put), so its effects commit exactly once with them.
CREATE TABLE kv (
  key         TEXT PRIMARY KEY,
  value       TEXT    NOT NULL,
  updated_seq INTEGER NOT NULL,
  session_id  TEXT    NOT NULL
);

-- Consecutive provider retries of the running prompt's current step; a
-- completed step resets it.
ALTER TABLE prompts ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
