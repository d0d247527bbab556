-- +goose Up
-- One answer for a retired secret, whatever the order of rotations
-- (docs/api.md "Authentication"): judge_api_token keeps the current and
-- one previous secret; a second rotation during the first one's overlap
-- pushed the oldest out of the row, and it then read as never issued
-- (UNAUTHENTICATED). Every secret a rotation retires is kept here (its hash
-- only), so it answers TOKEN_EXPIRED. Secrets retired before this migration
-- are not known and still answer UNAUTHENTICATED.
CREATE TABLE judge_api_token_retired (
  token_hash BINARY(32) NOT NULL PRIMARY KEY,
  token_id BIGINT NOT NULL,
  retired_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  KEY ix_token_retired_token (token_id)
) ENGINE=InnoDB;

-- A console session is bound to the admin secret that opened it (its
-- hash): valid only while the API still accepts that secret, so a rotation
-- ends it when its overlap does. Sessions open now were opened with a
-- secret no row records, so they end: admins log in again once.
ALTER TABLE judge_console_session
  ADD COLUMN token_secret_hash BINARY(32) NULL AFTER token_id;
UPDATE judge_console_session SET ended_at = NOW(6) WHERE ended_at IS NULL;

-- +goose Down
ALTER TABLE judge_console_session DROP COLUMN token_secret_hash;
DROP TABLE judge_api_token_retired;
