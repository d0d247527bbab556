-- +goose Up
-- A business token's own request budget (docs/business.md, "Rate limits"):
-- requests per second and burst of its token bucket. Both NULL (every
-- existing token) means the server's default (--business-rate,
-- --business-burst); rate 0 with burst 0 means unlimited. Both are set or
-- both are NULL.
ALTER TABLE judge_api_token
  ADD COLUMN rate_limit_rate DOUBLE NULL,
  ADD COLUMN rate_limit_burst INT NULL;

-- +goose Down
ALTER TABLE judge_api_token
  DROP COLUMN rate_limit_burst,
  DROP COLUMN rate_limit_rate;
