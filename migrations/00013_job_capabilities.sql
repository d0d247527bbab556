-- +goose Up
-- Nodes are handed only what they can run (docs/scheduling.md,
-- "Capabilities"). A job stores the capability bits it requires — its
-- language's bit and the bit of each problem type its manifest and
-- submission use (contracts/features.go); a node stores the bits it reported.
-- Jobs queued before this migration require nothing (0): every node of
-- their pool still takes them, as before. A node that never reported its
-- languages (NULL) is taken to run every language of its pool, and one that
-- never reported problem types only classic batch (0).
ALTER TABLE judge_job
  ADD COLUMN required_caps BIGINT UNSIGNED NOT NULL DEFAULT 0,
  DROP KEY ix_job_claim,
  ADD KEY ix_job_claim (pool, state, required_node_id, priority, created_at, id, available_at, required_caps);
ALTER TABLE judge_node
  ADD COLUMN caps_languages BIGINT UNSIGNED NULL,
  ADD COLUMN caps_features BIGINT UNSIGNED NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE judge_node
  DROP COLUMN caps_features,
  DROP COLUMN caps_languages;
ALTER TABLE judge_job
  DROP KEY ix_job_claim,
  ADD KEY ix_job_claim (pool, state, required_node_id, priority, created_at, id, available_at),
  DROP COLUMN required_caps;
