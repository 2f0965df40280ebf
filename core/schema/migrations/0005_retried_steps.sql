-- Provider retries of the prompt's turn in all (prompts.retries counts only
-- the current step's and is reset when a step completes). A retried request
-- is the same step: the step cap counts the turn's step rows minus these.
ALTER TABLE prompts ADD COLUMN retried_steps INTEGER NOT NULL DEFAULT 0;
