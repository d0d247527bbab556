-- +goose Up
-- Admin search and dashboards (admin API: job search, audit list, verdict mix).
--
-- judge_audit records the caller's address of actions taken through the admin
-- API, and is filtered by actor, action and time (node and job have keys
-- already). The table is written only by admin and control-plane actions, so
-- its keys cost nothing on the scheduling path.
--
-- judge_job gains three keys, each written once per job:
--   ix_job_finished covers the verdict mix (finished jobs of the last N
--     minutes counted by pool, kind, state and verdict): a range scan of the
--     window's rows only, never of every finished job. Written when the job
--     finishes (finished_at goes from NULL to a time).
--   ix_job_verdict serves a search by verdict newest first: without it a
--     rare or absent verdict reads the whole table. Written when the job
--     completes.
--   ix_job_created bounds a job search by creation time; written at enqueue.
ALTER TABLE judge_audit
  ADD COLUMN remote_addr VARCHAR(64) NULL AFTER detail,
  ADD KEY ix_audit_actor (actor, id),
  ADD KEY ix_audit_action (action, id),
  ADD KEY ix_audit_created (created_at);
ALTER TABLE judge_job
  ADD KEY ix_job_finished (finished_at, pool, kind, state, verdict),
  ADD KEY ix_job_verdict (verdict, id),
  ADD KEY ix_job_created (created_at);

-- +goose Down
ALTER TABLE judge_job
  DROP KEY ix_job_created,
  DROP KEY ix_job_verdict,
  DROP KEY ix_job_finished;
ALTER TABLE judge_audit
  DROP KEY ix_audit_created,
  DROP KEY ix_audit_action,
  DROP KEY ix_audit_actor,
  DROP COLUMN remote_addr;
