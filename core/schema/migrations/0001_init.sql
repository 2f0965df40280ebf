-- Bookkeeping: one row. epoch is taken (incremented) at every instance boot;
-- writes from an instance holding an older epoch are refused.
CREATE TABLE tree (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  epoch     INTEGER NOT NULL
);
INSERT INTO tree (singleton, epoch) VALUES (1, 0);

-- The event log: per-session seq contiguous from 1. id and at are fixed by Go
-- before the first attempt so a retried transaction writes the same values.
CREATE TABLE events (
  session_id TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  id         TEXT    NOT NULL UNIQUE,
  type       TEXT    NOT NULL,
  at         INTEGER NOT NULL,
  data       TEXT    NOT NULL,
  PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

-- Projection: one row per session.
CREATE TABLE sessions (
  id         TEXT PRIMARY KEY,
  parent_id  TEXT,
  root_id    TEXT    NOT NULL,
  principal  TEXT    NOT NULL,
  config     TEXT    NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  turns      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_root ON sessions (root_id);

-- Projection: the prompt queue. One prompt is one turn. state is one of
-- queued, running, succeeded, failed, interrupted, cancelled.
CREATE TABLE prompts (
  id           TEXT PRIMARY KEY,
  session_id   TEXT    NOT NULL,
  client_id    TEXT,
  body_hash    TEXT    NOT NULL,
  text         TEXT    NOT NULL,
  mode         TEXT    NOT NULL,
  state        TEXT    NOT NULL,
  outcome      TEXT,
  admitted_seq INTEGER NOT NULL,
  admitted_at  INTEGER NOT NULL,
  ended_at     INTEGER
);
CREATE UNIQUE INDEX prompts_by_client ON prompts (session_id, client_id) WHERE client_id IS NOT NULL;
CREATE INDEX prompts_by_state ON prompts (session_id, state, admitted_seq);

-- Projection: the transcript.
CREATE TABLE messages (
  id         TEXT PRIMARY KEY,
  session_id TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  prompt_id  TEXT,
  role       TEXT    NOT NULL,
  text       TEXT    NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX messages_by_session ON messages (session_id, seq);

-- Projection: sub-agent jobs, recorded in the parent's log. The sweep resumes
-- a child's claim only while a running job names it.
CREATE TABLE jobs (
  child_id  TEXT PRIMARY KEY,
  parent_id TEXT NOT NULL,
  call_id   TEXT NOT NULL,
  state     TEXT NOT NULL
);

-- Bookkeeping: "this session has runnable work". Written in the transaction
-- that makes work runnable, removed when none is left. execution_id is set
-- once an execution starts; resume_attempts counts resumes without progress;
-- retry_at is set while the turn sleeps on a scheduled provider retry.
CREATE TABLE claims (
  session_id      TEXT PRIMARY KEY,
  execution_id    TEXT,
  claimed_at      INTEGER NOT NULL,
  resume_attempts INTEGER NOT NULL DEFAULT 0,
  retry_at        INTEGER
);
