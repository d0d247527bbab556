-- +goose Up
-- Cross-replica wake-ups read each pool's highest job id
-- (SELECT pool, MAX(id) … GROUP BY pool, a loose index scan on this key), so
-- enqueue needs no write to a shared signal row.
CREATE INDEX ix_job_pool_id ON judge_job (pool, id);

-- +goose Down
DROP INDEX ix_job_pool_id ON judge_job;
