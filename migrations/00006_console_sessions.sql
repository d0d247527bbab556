-- +goose Up
-- Browser sessions of the admin console (control/console). A session is
-- opened with an admin token and stored here so every control replica serves
-- it; only a hash of the session id is kept. The CSRF token is per session
-- and is stored as the browser sees it (it is not a credential on its own:
-- a forged request also needs the session cookie, which SameSite=Strict and
-- HttpOnly keep from other sites and scripts).
CREATE TABLE judge_console_session (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  session_hash BINARY(32) NOT NULL,
  token_id BIGINT NOT NULL,
  csrf_token CHAR(64) NOT NULL,
  remote_addr VARCHAR(64) NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  last_seen_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  expires_at DATETIME(6) NOT NULL,
  ended_at DATETIME(6) NULL,
  UNIQUE KEY uk_console_session_hash (session_hash),
  KEY ix_console_session_expires (expires_at),
  KEY ix_console_session_token (token_id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE judge_console_session;
