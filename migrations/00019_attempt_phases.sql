-- +goose Up
-- Where an attempt's time went, as its node measured it and sent it with
-- its result (the machine contract's ResultPhases, docs/node.md "Job
-- phases"): a small JSON object of milliseconds and cache flags, kept on
-- the attempt beside its receipt and never inside the job's result, whose
-- digest decides ALREADY_COMMITTED against a conflict. NULL for attempts
-- that posted no result and for nodes that send no phases. TEXT rather
-- than JSON: MariaDB's JSON is LONGTEXT with a check, MySQL's a binary
-- type; the control plane only stores and returns it. Adding a nullable
-- column at the end is an instant change on MariaDB 10.3+ and MySQL
-- 8.0.12+: no table copy.
ALTER TABLE judge_job_attempt
  ADD COLUMN phases TEXT NULL;

-- +goose Down
ALTER TABLE judge_job_attempt
  DROP COLUMN phases;
