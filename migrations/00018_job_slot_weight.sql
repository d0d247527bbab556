-- +goose Up
-- A job holds slot_weight of its node's and its host group's slots while it
-- runs (docs/scheduling.md, "Slot weights"): the sandboxed programs it runs
-- at once — 1 for most problems, 2 for an interactive one (the program and
-- the interactor), processes + 1 for a communication task (its processes
-- and the manager). Written at enqueue from the manifest; a claim's
-- in-flight count sums it instead of counting rows, and a job is leased
-- only where its weight fits. Adding a NOT NULL column with a default at
-- the end is an instant change on MariaDB 10.3+ and MySQL 8.0.12+: no table
-- copy. Queued jobs of interactive and communication manifests are given
-- their weight here; jobs running now keep 1 (they were leased as one slot
-- and end as such), and finished ones keep 1 (a rejudge works its weight
-- out from the manifest again).
ALTER TABLE judge_job
  ADD COLUMN slot_weight TINYINT UNSIGNED NOT NULL DEFAULT 1;
UPDATE judge_job j JOIN judge_manifest m ON m.id = j.manifest_id
   SET j.slot_weight = CASE JSON_UNQUOTE(JSON_EXTRACT(m.body, '$.checker.type'))
         WHEN 'interactive' THEN 2
         ELSE 1 + CAST(JSON_UNQUOTE(JSON_EXTRACT(m.body, '$.checker.special.processes')) AS UNSIGNED) END
 WHERE j.state = 'QUEUED'
   AND JSON_UNQUOTE(JSON_EXTRACT(m.body, '$.checker.type')) IN ('interactive', 'communication');

-- +goose Down
ALTER TABLE judge_job
  DROP COLUMN slot_weight;
