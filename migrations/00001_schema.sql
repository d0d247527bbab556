-- +goose Up
-- Marks this schema as the control plane's; the SQL judge refuses to run on a
-- server that holds it.
CREATE TABLE kece_control_marker (
  id TINYINT NOT NULL PRIMARY KEY,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;
INSERT INTO kece_control_marker (id) VALUES (1);

CREATE TABLE judge_host_group (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(128) NOT NULL,
  slot_capacity INT NOT NULL,
  revision BIGINT NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  UNIQUE KEY uk_host_group_name (name)
) ENGINE=InnoDB;

CREATE TABLE judge_node (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(128) NOT NULL,
  pool VARCHAR(16) NOT NULL,
  host_group_id BIGINT NOT NULL,
  desired_state VARCHAR(24) NOT NULL DEFAULT 'PENDING_VERIFICATION',
  slots INT NOT NULL,
  revision BIGINT NOT NULL DEFAULT 1,
  address VARCHAR(255) NULL,
  credential_hash BINARY(32) NULL,
  credential_version INT NOT NULL DEFAULT 0,
  revoked_at DATETIME(6) NULL,
  session_epoch BIGINT NOT NULL DEFAULT 0,
  session_token_hash BINARY(32) NULL,
  boot_id VARCHAR(64) NULL,
  session_started_at DATETIME(6) NULL,
  last_heartbeat_at DATETIME(6) NULL,
  reported_runtime VARCHAR(255) NULL,
  reported_health TEXT NULL,
  reported_slots_busy INT NULL,
  reported_draining TINYINT(1) NOT NULL DEFAULT 0,
  -- Queued CHECK jobs bound to this node: lets a claim skip their query.
  pending_checks INT NOT NULL DEFAULT 0,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  UNIQUE KEY uk_node_name (name),
  UNIQUE KEY uk_node_credential (credential_hash),
  UNIQUE KEY uk_node_session (session_token_hash),
  KEY ix_node_group (host_group_id),
  KEY ix_node_pool_state (pool, desired_state),
  CONSTRAINT fk_node_group FOREIGN KEY (host_group_id) REFERENCES judge_host_group (id)
) ENGINE=InnoDB;

CREATE TABLE judge_join_code (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  node_id BIGINT NOT NULL,
  code_hash BINARY(32) NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  consumed_at DATETIME(6) NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  UNIQUE KEY uk_join_code (code_hash),
  KEY ix_join_node (node_id),
  CONSTRAINT fk_join_node FOREIGN KEY (node_id) REFERENCES judge_node (id)
) ENGINE=InnoDB;

CREATE TABLE judge_node_check (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  node_id BIGINT NOT NULL,
  job_id BIGINT NULL,
  config_revision BIGINT NOT NULL,
  runtime_version VARCHAR(255) NULL,
  outcome VARCHAR(16) NOT NULL DEFAULT 'PENDING',
  steps TEXT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  finished_at DATETIME(6) NULL,
  KEY ix_check_node (node_id, id),
  KEY ix_check_job (job_id)
) ENGINE=InnoDB;

CREATE TABLE judge_audit (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  actor VARCHAR(128) NOT NULL,
  action VARCHAR(64) NOT NULL,
  node_id BIGINT NULL,
  job_id BIGINT NULL,
  reason VARCHAR(1024) NOT NULL DEFAULT '',
  detail TEXT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  KEY ix_audit_node (node_id, id),
  KEY ix_audit_job (job_id, id)
) ENGINE=InnoDB;

CREATE TABLE judge_api_token (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  kind VARCHAR(16) NOT NULL,
  name VARCHAR(128) NOT NULL,
  token_hash BINARY(32) NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  revoked_at DATETIME(6) NULL,
  UNIQUE KEY uk_token_hash (token_hash),
  UNIQUE KEY uk_token_name (kind, name)
) ENGINE=InnoDB;

CREATE TABLE judge_artifact (
  sha256 CHAR(64) NOT NULL PRIMARY KEY,
  size BIGINT NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;

CREATE TABLE judge_manifest (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  digest CHAR(64) NOT NULL,
  kind VARCHAR(8) NOT NULL,
  case_count INT NOT NULL,
  body MEDIUMTEXT NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  UNIQUE KEY uk_manifest_digest (digest)
) ENGINE=InnoDB;

-- Which digests a manifest references: artifact downloads are allowed only for these.
CREATE TABLE judge_manifest_artifact (
  manifest_id BIGINT NOT NULL,
  sha256 CHAR(64) NOT NULL,
  PRIMARY KEY (manifest_id, sha256)
) ENGINE=InnoDB;

-- The current pointer of a business submission.
CREATE TABLE judge_submission (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  submission_type VARCHAR(32) NOT NULL,
  submission_id VARCHAR(64) NOT NULL,
  current_job_id BIGINT NOT NULL DEFAULT 0,
  generation INT NOT NULL DEFAULT 0,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  UNIQUE KEY uk_submission (submission_type, submission_id)
) ENGINE=InnoDB;

CREATE TABLE judge_job (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  submission_type VARCHAR(32) NOT NULL,
  submission_id VARCHAR(64) NOT NULL,
  generation INT NOT NULL,
  kind VARCHAR(16) NOT NULL,
  pool VARCHAR(16) NOT NULL,
  runtime_spec VARCHAR(32) NOT NULL,
  manifest_id BIGINT NOT NULL,
  request_snapshot MEDIUMTEXT NOT NULL,
  request_digest CHAR(64) NOT NULL,
  priority INT NOT NULL DEFAULT 0,
  -- 0 for pool work; a node id for CHECK jobs bound to that node.
  required_node_id BIGINT NOT NULL DEFAULT 0,
  state VARCHAR(16) NOT NULL,
  status_version BIGINT NOT NULL DEFAULT 1,
  phase VARCHAR(16) NULL,
  progress_seq BIGINT NOT NULL DEFAULT 0,
  cases_done INT NOT NULL DEFAULT 0,
  cases_total INT NOT NULL DEFAULT 0,
  available_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  attempt_count INT NOT NULL DEFAULT 0,
  max_attempts INT NOT NULL,
  node_id BIGINT NULL,
  host_group_id BIGINT NULL,
  session_epoch BIGINT NULL,
  lease_epoch BIGINT NOT NULL DEFAULT 0,
  lease_until DATETIME(6) NULL,
  verdict VARCHAR(8) NULL,
  result MEDIUMTEXT NULL,
  result_digest CHAR(64) NULL,
  last_error_code VARCHAR(64) NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  started_at DATETIME(6) NULL,
  finished_at DATETIME(6) NULL,
  updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  UNIQUE KEY uk_job_identity (submission_type, submission_id, generation),
  -- Claim: equality on pool/state/required_node_id, then the ORDER BY columns.
  KEY ix_job_claim (pool, state, required_node_id, priority, available_at, id),
  KEY ix_job_lease (state, lease_until, id),
  KEY ix_job_node (node_id, state),
  KEY ix_job_group (host_group_id, state)
) ENGINE=InnoDB;

CREATE TABLE judge_job_attempt (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  job_id BIGINT NOT NULL,
  lease_epoch BIGINT NOT NULL,
  node_id BIGINT NOT NULL,
  host_group_id BIGINT NOT NULL,
  session_epoch BIGINT NOT NULL,
  started_at DATETIME(6) NOT NULL,
  ended_at DATETIME(6) NULL,
  outcome VARCHAR(24) NOT NULL DEFAULT 'RUNNING',
  error_class VARCHAR(64) NULL,
  receipt_digest CHAR(64) NULL,
  UNIQUE KEY uk_attempt (job_id, lease_epoch),
  KEY ix_attempt_node (node_id, id)
) ENGINE=InnoDB;

-- Settlement outbox: one row per (job, event type); consumers lease rows with
-- SKIP LOCKED, so a row that commits late is still delivered (no id cursor).
CREATE TABLE judge_settlement_event (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  job_id BIGINT NOT NULL,
  event_type VARCHAR(32) NOT NULL,
  submission_type VARCHAR(32) NOT NULL,
  submission_id VARCHAR(64) NOT NULL,
  generation INT NOT NULL,
  payload MEDIUMTEXT NOT NULL,
  state VARCHAR(16) NOT NULL DEFAULT 'PENDING',
  consumer VARCHAR(128) NULL,
  attempts INT NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  last_error VARCHAR(1024) NULL,
  delivered_at DATETIME(6) NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  UNIQUE KEY uk_event (job_id, event_type),
  KEY ix_event_ready (state, next_attempt_at, id)
) ENGINE=InnoDB;

CREATE TABLE judge_idempotency_key (
  token_id BIGINT NOT NULL,
  idem_key VARCHAR(128) NOT NULL,
  request_digest CHAR(64) NOT NULL,
  job_id BIGINT NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (token_id, idem_key)
) ENGINE=InnoDB;

-- Cheap cross-replica wake-up for claim long-polls. A transaction that makes
-- work ready bumps one of 16 slots of its pool as its last statement (so the
-- bump commits with the work, and concurrent enqueues rarely share a row);
-- every replica polls SUM(seq) per pool with one query.
CREATE TABLE judge_pool_signal (
  pool VARCHAR(16) NOT NULL,
  slot TINYINT NOT NULL,
  seq BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (pool, slot)
) ENGINE=InnoDB;
INSERT INTO judge_pool_signal (pool, slot) VALUES ('cpp', 0), ('cpp', 1), ('cpp', 2), ('cpp', 3), ('cpp', 4), ('cpp', 5), ('cpp', 6), ('cpp', 7), ('cpp', 8), ('cpp', 9), ('cpp', 10), ('cpp', 11), ('cpp', 12), ('cpp', 13), ('cpp', 14), ('cpp', 15), ('java', 0), ('java', 1), ('java', 2), ('java', 3), ('java', 4), ('java', 5), ('java', 6), ('java', 7), ('java', 8), ('java', 9), ('java', 10), ('java', 11), ('java', 12), ('java', 13), ('java', 14), ('java', 15), ('python', 0), ('python', 1), ('python', 2), ('python', 3), ('python', 4), ('python', 5), ('python', 6), ('python', 7), ('python', 8), ('python', 9), ('python', 10), ('python', 11), ('python', 12), ('python', 13), ('python', 14), ('python', 15), ('arkts', 0), ('arkts', 1), ('arkts', 2), ('arkts', 3), ('arkts', 4), ('arkts', 5), ('arkts', 6), ('arkts', 7), ('arkts', 8), ('arkts', 9), ('arkts', 10), ('arkts', 11), ('arkts', 12), ('arkts', 13), ('arkts', 14), ('arkts', 15), ('mysql', 0), ('mysql', 1), ('mysql', 2), ('mysql', 3), ('mysql', 4), ('mysql', 5), ('mysql', 6), ('mysql', 7), ('mysql', 8), ('mysql', 9), ('mysql', 10), ('mysql', 11), ('mysql', 12), ('mysql', 13), ('mysql', 14), ('mysql', 15);

-- +goose Down
DROP TABLE judge_pool_signal;
DROP TABLE judge_idempotency_key;
DROP TABLE judge_settlement_event;
DROP TABLE judge_job_attempt;
DROP TABLE judge_job;
DROP TABLE judge_submission;
DROP TABLE judge_manifest_artifact;
DROP TABLE judge_manifest;
DROP TABLE judge_artifact;
DROP TABLE judge_api_token;
DROP TABLE judge_audit;
DROP TABLE judge_node_check;
DROP TABLE judge_join_code;
DROP TABLE judge_node;
DROP TABLE judge_host_group;
DROP TABLE kece_control_marker;
