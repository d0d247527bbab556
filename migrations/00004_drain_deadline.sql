-- +goose Up
-- A drain may carry a deadline decided by the control plane (admin API
-- `deadlineSeconds`): when it passes while the node is still DRAINING, the
-- maintenance pass takes the node's remaining leases back (requeued, not
-- counted as attempts) and disables it. NULL: no deadline. The index lets
-- that pass find due nodes without scanning the node table.
ALTER TABLE judge_node
  ADD COLUMN drain_deadline_at DATETIME(6) NULL AFTER pending_checks,
  ADD KEY ix_node_drain_deadline (desired_state, drain_deadline_at);

-- +goose Down
ALTER TABLE judge_node
  DROP KEY ix_node_drain_deadline,
  DROP COLUMN drain_deadline_at;
