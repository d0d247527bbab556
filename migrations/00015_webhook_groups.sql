-- +goose Up
-- Webhooks per consumer group (docs/business.md "Webhooks"): each group may
-- have its own endpoint, delivery settings and signing secrets. One row per
-- group that pushes; a group without a row is pulled. revision grows with
-- every change, so a replica's sender sees what changed without comparing
-- secrets.
CREATE TABLE judge_webhook_group (
  consumer_group VARCHAR(64) NOT NULL PRIMARY KEY,
  url VARCHAR(2048) NOT NULL,
  enabled TINYINT(1) NOT NULL DEFAULT 1,
  concurrency INT NOT NULL,
  timeout_ms INT NOT NULL,
  max_attempts INT NOT NULL,
  revision BIGINT NOT NULL DEFAULT 1,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  CONSTRAINT fk_webhook_group_consumer FOREIGN KEY (consumer_group) REFERENCES judge_consumer_group (name)
) ENGINE=InnoDB;

-- A group's signing secrets, encrypted at rest (control/atrest: AES-256-GCM,
-- a nonce per value, sealed = nonce || ciphertext || tag) with the key named
-- by key_id. Several at once during a rotation: every delivery is signed
-- with each secret not yet expired (expires_at NULL: current).
CREATE TABLE judge_webhook_secret (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  consumer_group VARCHAR(64) NOT NULL,
  key_id VARCHAR(32) NOT NULL,
  sealed VARBINARY(512) NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expires_at DATETIME(6) NULL,
  KEY ix_webhook_secret_group (consumer_group, id),
  KEY ix_webhook_secret_key (key_id),
  CONSTRAINT fk_webhook_secret_group FOREIGN KEY (consumer_group) REFERENCES judge_webhook_group (consumer_group) ON DELETE CASCADE
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE judge_webhook_secret;
DROP TABLE judge_webhook_group;
