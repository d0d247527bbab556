-- +goose Up
-- Business tenancy (docs/business.md "Tenancy").
--
-- A business token may be scoped to submission types: submission_types is a
-- comma-separated set (types match ^[A-Z][A-Z0-9_]{0,31}$, so no commas);
-- NULL means every type, which is what every existing token keeps.
-- Each business token belongs to one consumer group; existing tokens are in
-- 'default', the group every settlement already went to.
ALTER TABLE judge_api_token
  ADD COLUMN submission_types VARCHAR(2048) NULL,
  ADD COLUMN consumer_group VARCHAR(64) NOT NULL DEFAULT 'default';

-- The groups settlements fan out to, with the union of the submission types
-- of their live tokens (NULL: every type). 'default' always exists and
-- always takes every type, so a deployment without named groups (and a
-- shared-database caller with no token at all) sees no change. Kept apart
-- from judge_api_token so the settlement INSERT … SELECT reads a table that
-- changes only when tokens are created or revoked.
CREATE TABLE judge_consumer_group (
  name VARCHAR(64) NOT NULL PRIMARY KEY,
  submission_types VARCHAR(2048) NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;
INSERT INTO judge_consumer_group (name, submission_types) VALUES ('default', NULL);

-- One outbox row per (job, event type, consumer group): each group has its
-- own delivery state (lease, attempts, dead letter). Existing rows belong
-- to 'default'. The ready index leads with state (the fleet gauge walks
-- PENDING and DEAD), then the group a claim names.
ALTER TABLE judge_settlement_event
  ADD COLUMN consumer_group VARCHAR(64) NOT NULL DEFAULT 'default' AFTER event_type,
  DROP KEY uk_event,
  ADD UNIQUE KEY uk_event (job_id, event_type, consumer_group),
  DROP KEY ix_event_ready,
  ADD KEY ix_event_ready (state, consumer_group, next_attempt_at, id);

-- +goose Down
ALTER TABLE judge_settlement_event
  DROP KEY ix_event_ready,
  ADD KEY ix_event_ready (state, next_attempt_at, id);
DELETE FROM judge_settlement_event WHERE consumer_group <> 'default';
ALTER TABLE judge_settlement_event
  DROP KEY uk_event,
  ADD UNIQUE KEY uk_event (job_id, event_type),
  DROP COLUMN consumer_group;
DROP TABLE judge_consumer_group;
ALTER TABLE judge_api_token
  DROP COLUMN consumer_group,
  DROP COLUMN submission_types;
