-- +goose Up
-- A consumer's lease of a settlement event lives in a column of its own,
-- outside ix_event_ready (state, consumer_group, next_attempt_at, id):
-- leasing an event then rewrites no index entry, only the row. Before this,
-- a lease moved next_attempt_at to the lease's end, which deleted and
-- re-inserted the event's ready-index entry on every delivery (measured:
-- 2-12 % of the database server's CPU per job lifecycle,
-- docs/scheduling.md). An event is due when
-- next_attempt_at has passed and it holds no unexpired lease. Rows leased
-- before the upgrade keep their lease in next_attempt_at and lease_until
-- NULL, which means the same. Adding a NULL column at the end is an
-- instant change on MariaDB 10.3+ and MySQL 8.0.12+: no table copy.
ALTER TABLE judge_settlement_event
  ADD COLUMN lease_until DATETIME(6) NULL;

-- +goose Down
-- Leases held in lease_until move back into next_attempt_at, so no event
-- leased now is delivered again at once after the downgrade.
UPDATE judge_settlement_event SET next_attempt_at = lease_until
 WHERE state = 'PENDING' AND lease_until > next_attempt_at;
ALTER TABLE judge_settlement_event
  DROP COLUMN lease_until;
