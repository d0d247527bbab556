-- +goose Up
-- API tokens gain an optional expiry, a last-use time (for `token list`)
-- and rotation with overlap: a rotated token keeps its row, and so its id —
-- what is keyed by the token (idempotency keys, audit actors) survives —
-- while its previous secret stays valid until prev_valid_until.
ALTER TABLE judge_api_token
  ADD COLUMN expires_at DATETIME(6) NULL,
  ADD COLUMN last_used_at DATETIME(6) NULL,
  ADD COLUMN rotated_at DATETIME(6) NULL,
  ADD COLUMN prev_token_hash BINARY(32) NULL,
  ADD COLUMN prev_valid_until DATETIME(6) NULL,
  ADD UNIQUE KEY uk_token_prev_hash (prev_token_hash);

-- +goose Down
ALTER TABLE judge_api_token
  DROP KEY uk_token_prev_hash,
  DROP COLUMN prev_valid_until,
  DROP COLUMN prev_token_hash,
  DROP COLUMN rotated_at,
  DROP COLUMN last_used_at,
  DROP COLUMN expires_at;
