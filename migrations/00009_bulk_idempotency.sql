-- +goose Up
-- A bulk enqueue (POST /api/v1/submissions/bulk) records its Idempotency-Key
-- like a single enqueue, with the ids of all its jobs in request order (a
-- JSON array of numbers), so a retried request gets the same jobs back
-- whatever the submissions have become since. NULL for a single enqueue,
-- whose one job is job_id; for a bulk key job_id is the first item's job.
ALTER TABLE judge_idempotency_key
  ADD COLUMN bulk_job_ids MEDIUMTEXT NULL;

-- +goose Down
ALTER TABLE judge_idempotency_key
  DROP COLUMN bulk_job_ids;
