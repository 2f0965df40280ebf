-- Projection: the permission rules an `always` reply saved (DESIGN §9),
-- scoped to the tree (this database) and kept apart from single decisions,
-- which are blockers rows of kind 'permission'. Rows are inserted by
-- session.permission.rule_saved@1 only, so a rebuild yields the same rows.
-- id is the answered request's id and the rule's ordinal; session_id the
-- session whose request it answered.
CREATE TABLE permission_rules (
  id         TEXT    PRIMARY KEY,
  session_id TEXT    NOT NULL,
  blocker_id TEXT    NOT NULL,
  action     TEXT    NOT NULL,
  resource   TEXT    NOT NULL,
  decision   TEXT    NOT NULL,
  exact      INTEGER NOT NULL,
  saved_seq  INTEGER NOT NULL,
  saved_at   INTEGER NOT NULL
);
