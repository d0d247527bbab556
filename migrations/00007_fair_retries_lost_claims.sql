-- +goose Up
-- Fair retries (issue 14 item 2): a claim orders ready jobs by their original
-- enqueue time (created_at, never changed by a retry) rather than by
-- available_at, which a requeue pushes to now + backoff. available_at stays
-- an eligibility filter; it is the index's last column so the filter is
-- checked in the index (index condition pushdown) while the ORDER BY
-- (priority, created_at, id) is read in index order: no filesort.
--
-- Harmless lost claims (item 3): each attempt remembers the claim request id
-- that granted it, so the same request again answers the same leases; and
-- whether judging started on it (the node's first progress report), so an
-- attempt that never started is not counted toward max_attempts but toward
-- its own cap (judge_job.unstarted_attempts).
ALTER TABLE judge_job
  ADD COLUMN unstarted_attempts INT NOT NULL DEFAULT 0 AFTER attempt_count,
  DROP KEY ix_job_claim,
  ADD KEY ix_job_claim (pool, state, required_node_id, priority, created_at, id, available_at);

ALTER TABLE judge_job_attempt
  ADD COLUMN claim_request_id VARCHAR(64) NULL,
  ADD COLUMN judging_started TINYINT(1) NULL,
  ADD KEY ix_attempt_claim (node_id, claim_request_id);

-- +goose Down
ALTER TABLE judge_job_attempt
  DROP KEY ix_attempt_claim,
  DROP COLUMN judging_started,
  DROP COLUMN claim_request_id;

ALTER TABLE judge_job
  DROP KEY ix_job_claim,
  ADD KEY ix_job_claim (pool, state, required_node_id, priority, available_at, id),
  DROP COLUMN unstarted_attempts;
