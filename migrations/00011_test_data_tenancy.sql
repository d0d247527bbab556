-- +goose Up
-- Tenancy covers test data (docs/business.md "Tenancy"): a manifest and an
-- uploaded artifact belong to the submission types of the business token
-- that published them.
--
-- owner: '' is shared: every caller may use it. Every manifest and artifact
-- published before this migration is shared, so each keeps working for
-- every token that could use it before (all of them); the control plane's
-- own test data (self-checks) is shared too. '*' is published by a token of
-- every type: only tokens of every type may use it. Otherwise the sorted,
-- comma-separated types of the publishing token: tokens whose types include
-- all of them (and tokens of every type) may use it. Types match
-- ^[A-Z][A-Z0-9_]{0,31}$ and a token has at most 32, so 1100 ASCII bytes
-- hold any owner and fit a unique key with the digest.
ALTER TABLE judge_manifest
  ADD COLUMN owner VARCHAR(1100) CHARACTER SET ascii NOT NULL DEFAULT '' AFTER digest,
  DROP KEY uk_manifest_digest,
  ADD UNIQUE KEY uk_manifest_digest (digest, owner);

-- Who uploaded which content: one row per (digest, owner). The bytes are
-- stored once (judge_artifact, the content-addressed files); an upload
-- answers 201 when its owner had no row yet, whoever else holds the
-- content, so it tells nobody whether another tenant stored it.
CREATE TABLE judge_artifact_owner (
  sha256 CHAR(64) NOT NULL,
  owner VARCHAR(1100) CHARACTER SET ascii NOT NULL,
  created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (sha256, owner)
) ENGINE=InnoDB;
INSERT INTO judge_artifact_owner (sha256, owner) SELECT sha256, '' FROM judge_artifact;

-- +goose Down
-- Every manifest stays (jobs reference their ids), so the same content
-- published by two owners keeps two rows and the digest key comes back
-- non-unique.
DROP TABLE judge_artifact_owner;
ALTER TABLE judge_manifest
  DROP KEY uk_manifest_digest,
  DROP COLUMN owner,
  ADD KEY uk_manifest_digest (digest);
