-- +goose Up
-- ix_job_group (host_group_id, state) goes. Each of its readers (a claim's
-- in-flight count, the host groups' admin view, reconcile's over-capacity
-- rule) reads only RUNNING jobs, which ix_job_lease (state, lease_until, id)
-- finds, and running jobs are at most the fleet's slots. The key itself was
-- rewritten at every state change of every job: the completion of a job
-- rewrote six secondary keys, measured as most of its cost
-- (docs/scheduling.md, "CPU per job and the machine's idle share").
-- Dropping a secondary key is an in-place change on MariaDB 10.6+ and
-- MySQL 8.0: no table copy.
ALTER TABLE judge_job
  DROP KEY ix_job_group;

-- +goose Down
ALTER TABLE judge_job
  ADD KEY ix_job_group (host_group_id, state);
