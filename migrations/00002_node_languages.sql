-- +goose Up
-- The latest per-language report of each node's heartbeat (a JSON array of
-- machine-contract LanguageReport objects): what GET /api/v1/languages
-- serves for the ready nodes of each pool. NULL until a node reports.
ALTER TABLE judge_node ADD COLUMN reported_languages MEDIUMTEXT NULL;

-- +goose Down
ALTER TABLE judge_node DROP COLUMN reported_languages;
