package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/manifest"
)

// RegisterArtifact records a stored file's digest and size (the bytes live in
// the artifact store) as shared test data: the control plane's own (self-checks).
// Registering the same digest twice is a no-op; a different size for the same
// digest is a conflict.
func (s *Manifests) RegisterArtifact(ctx context.Context, sha256 string, size int64) error {
	_, err := s.registerArtifact(ctx, sharedOwner, sha256, size)
	return err
}

// RegisterArtifactAs records a stored file for tenant t. created is true
// when t had not registered this digest before, whoever else has: the
// answer is the same whether or not another tenant holds the content. The
// bytes are stored once; each owner costs one judge_artifact_owner row.
func (s *Manifests) RegisterArtifactAs(ctx context.Context, t Tenant, sha256 string, size int64) (created bool, err error) {
	return s.registerArtifact(ctx, t.owner(), sha256, size)
}

// registerArtifact records the digest and its owner in one transaction,
// so an upload of content another owner holds commits as many times (once)
// as one of new content: the two statements one after the other in
// autocommit cost new content two durable commits and held content one
// (its first statement changes no row), which made uploading held content
// measurably faster (docs/business.md, "No existence oracle on test
// data").
func (s *core) registerArtifact(ctx context.Context, owner, sha256 string, size int64) (bool, error) {
	if !manifest.ValidDigest(sha256) || size < 0 {
		return false, jobdb.Invalid("sha256", "must be 64 lowercase hex with a non-negative size")
	}
	var created bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO judge_artifact (sha256, size) VALUES (?, ?) ON DUPLICATE KEY UPDATE sha256 = sha256`, sha256, size); err != nil {
			return fmt.Errorf("store: register artifact: %w", err)
		}
		var got int64
		if err := tx.QueryRowContext(ctx, `SELECT size FROM judge_artifact WHERE sha256 = ?`, sha256).Scan(&got); err != nil {
			return fmt.Errorf("store: register artifact: %w", err)
		}
		if got != size {
			return jobdb.Conflict("artifact %s is registered with size %d, not %d", sha256, got, size)
		}
		r, err := tx.ExecContext(ctx, `INSERT IGNORE INTO judge_artifact_owner (sha256, owner) VALUES (?, ?)`, sha256, owner)
		if err != nil {
			return fmt.Errorf("store: register artifact: %w", err)
		}
		n, err := r.RowsAffected()
		created = n == 1
		return err
	})
	return created, err
}

// ArtifactSizes returns the registered size of each of the given digests
// that t may reference (registered by an owner t may use); the others are
// absent from the map, as if never uploaded.
func (s *Manifests) ArtifactSizes(ctx context.Context, t Tenant, digests []string) (map[string]int64, error) {
	out := make(map[string]int64, len(digests))
	for start := 0; start < len(digests); start += 500 {
		rows, err := s.artifactOwners(ctx, s.db.Pool, digests[start:min(start+500, len(digests))])
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if t.mayUse(r.Owner) {
				out[r.Digest] = r.Size
			}
		}
	}
	return out, nil
}

// artifactOwner is one (digest, owner) registration with the digest's size.
type artifactOwner struct {
	Digest string `db:"sha256"`
	Size   int64  `db:"size"`
	Owner  string `db:"owner"`
}

func (s *core) artifactOwners(ctx context.Context, q sqlx.QueryerContext, digests []string) ([]artifactOwner, error) {
	query, args, err := sqlx.In(`SELECT a.sha256, a.size, o.owner FROM judge_artifact a
		JOIN judge_artifact_owner o ON o.sha256 = a.sha256 WHERE a.sha256 IN (?)`, digests)
	if err != nil {
		return nil, fmt.Errorf("store: artifact owners: %w", err)
	}
	var rows []artifactOwner
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("store: artifact owners: %w", err)
	}
	return rows, nil
}

// PublishedManifest identifies a manifest.
type PublishedManifest struct {
	ID      int64
	Digest  string
	Created bool
}

// PublishManifest validates and stores an immutable manifest as shared test
// data: the control plane's own (self-checks), which every caller may use.
// Every referenced digest must be a registered artifact of the stated size.
// The same content publishes to the same manifest.
func (s *Manifests) PublishManifest(ctx context.Context, m manifest.Manifest) (PublishedManifest, error) {
	return s.publishManifest(ctx, sharedOwner, Tenant{}, m)
}

// PublishManifestAs publishes a manifest that belongs to tenant t: every
// referenced digest must be an artifact t may reference, and only callers
// that may use t's test data can read it or enqueue against it. The same
// content published again by the same owner answers with the same manifest;
// by another owner it is a manifest of its own, so the answer never tells
// whether another tenant published it.
func (s *Manifests) PublishManifestAs(ctx context.Context, t Tenant, m manifest.Manifest) (PublishedManifest, error) {
	return s.publishManifest(ctx, t.owner(), t, m)
}

func (s *core) publishManifest(ctx context.Context, owner string, t Tenant, m manifest.Manifest) (PublishedManifest, error) {
	if err := m.ValidateNew(); err != nil {
		return PublishedManifest{}, &ValidationError{Field: "manifest", Problem: err.Error()}
	}
	body, digest, err := m.Canonical()
	if err != nil {
		return PublishedManifest{}, err
	}
	want := m.Digests()
	digests := make([]string, 0, len(want))
	for d := range want {
		digests = append(digests, d)
	}
	sort.Strings(digests)
	var out PublishedManifest
	err = s.db.InTx(ctx, func(tx *sql.Tx) error {
		const byContent = `SELECT id FROM judge_manifest WHERE digest = ? AND owner = ?`
		var id int64
		err := tx.QueryRowContext(ctx, byContent, digest, owner).Scan(&id)
		if err == nil {
			out = PublishedManifest{ID: id, Digest: digest}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: publish manifest: %w", err)
		}
		if err := s.checkReferences(ctx, tx, t, digests, want); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx,
			`INSERT INTO judge_manifest (digest, owner, kind, case_count, body) VALUES (?, ?, ?, ?, ?)`,
			digest, owner, m.Kind, len(m.Cases), body)
		if jobdb.IsDuplicate(err) {
			// A concurrent publish of the same content won; read its id.
			return tx.QueryRowContext(ctx, byContent, digest, owner).Scan(&out.ID)
		}
		if err != nil {
			return fmt.Errorf("store: publish manifest: %w", err)
		}
		id, _ = r.LastInsertId()
		for _, d := range digests {
			if _, err := tx.ExecContext(ctx,
				`INSERT INTO judge_manifest_artifact (manifest_id, sha256) VALUES (?, ?)`, id, d); err != nil {
				return fmt.Errorf("store: publish manifest: %w", err)
			}
		}
		out = PublishedManifest{ID: id, Digest: digest, Created: true}
		return nil
	})
	return out, err
}

// checkReferences refuses a manifest that references a digest t may not
// reference (never uploaded, or uploaded only by owners t may not use; the
// same words for both) or with another size than registered.
func (s *core) checkReferences(ctx context.Context, tx *sql.Tx, t Tenant, digests []string, want map[string]int64) error {
	if len(digests) == 0 {
		return nil
	}
	rows, err := s.artifactOwners(ctx, s.db.Txx(tx), digests)
	if err != nil {
		return err
	}
	have := make(map[string]int64, len(rows))
	for _, r := range rows {
		if t.mayUse(r.Owner) {
			have[r.Digest] = r.Size
		}
	}
	for _, d := range digests {
		size, ok := have[d]
		if !ok {
			return jobdb.Invalid("manifest", "artifact %s is not uploaded", d)
		}
		if size != want[d] {
			return jobdb.Invalid("manifest", "artifact %s has size %d, the manifest says %d", d, size, want[d])
		}
	}
	return nil
}

// Manifest reads a published manifest, whoever owns it (the lease path and
// the machine protocol: a job's manifest was checked when it was enqueued).
func (s *Manifests) Manifest(ctx context.Context, id int64) (manifest.Manifest, error) {
	om, err := s.db.ReadManifest(ctx, s.db.Pool, id)
	return om.Manifest, err
}

// manifestFor reads a manifest t may use; one it may not use is ErrNotFound,
// exactly as one that does not exist.
func (s *core) manifestFor(ctx context.Context, t Tenant, id int64) (manifest.Manifest, error) {
	om, err := s.db.ReadManifest(ctx, s.db.Pool, id)
	if err != nil {
		return manifest.Manifest{}, err
	}
	if !t.mayUse(om.Owner) {
		return manifest.Manifest{}, fmt.Errorf("manifest %d: %w", id, ErrNotFound)
	}
	return om.Manifest, nil
}

// StoredManifest is a published manifest with its identity.
type StoredManifest struct {
	ID        int64
	Digest    string
	CreatedAt time.Time
	Manifest  manifest.Manifest
}

// ManifestRecord reads a published manifest t may use, with its digest and
// creation time; ErrNotFound if there is none with that id or t may not
// use it (the same error, so its existence is not told).
func (s *Manifests) ManifestRecord(ctx context.Context, t Tenant, id int64) (StoredManifest, error) {
	var r struct {
		Digest    string    `db:"digest"`
		Owner     string    `db:"owner"`
		CreatedAt time.Time `db:"created_at"`
		Body      []byte    `db:"body"`
	}
	err := s.db.Pool.GetContext(ctx, &r, `SELECT digest, owner, created_at, body FROM judge_manifest WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !t.mayUse(r.Owner) {
		return StoredManifest{}, fmt.Errorf("manifest %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return StoredManifest{}, fmt.Errorf("store: manifest record: %w", err)
	}
	out := StoredManifest{ID: id, Digest: r.Digest, CreatedAt: r.CreatedAt}
	if out.Manifest, err = manifest.Parse(r.Body); err != nil {
		return StoredManifest{}, fmt.Errorf("store: stored manifest %d does not parse: %w", id, err)
	}
	return out, nil
}

// ArtifactAccess is the answer to "may this lease download this digest".
var (
	// ErrArtifactNotInManifest: the digest is not referenced by the job's manifest.
	ErrArtifactNotInManifest = errors.New("artifact not in the job's manifest")
)

// CheckArtifactAccess allows a download only for a digest in the job's
// manifest and only while the session holds the given live lease.
func (s *Manifests) CheckArtifactAccess(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, sha256 string) (size int64, err error) {
	var live bool
	var inManifest sql.NullInt64
	err = s.db.Pool.QueryRowContext(ctx,
		`SELECT COALESCE(j.state = 'RUNNING' AND j.node_id = ? AND j.session_epoch = ? AND j.lease_epoch = ?
		          AND j.lease_until > NOW(6), FALSE),
		        (SELECT ar.size FROM judge_manifest_artifact a JOIN judge_artifact ar ON ar.sha256 = a.sha256
		         WHERE a.manifest_id = j.manifest_id AND a.sha256 = ?)
		 FROM judge_job j WHERE j.id = ?`, sess.NodeID, sess.SessionEpoch, leaseEpoch, sha256, jobID).Scan(&live, &inManifest)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("job %d: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("store: artifact access: %w", err)
	}
	if !live {
		return 0, fmt.Errorf("job %d lease %d: %w", jobID, leaseEpoch, ErrLeaseLost)
	}
	if !inManifest.Valid {
		return 0, fmt.Errorf("job %d: %s: %w", jobID, sha256, ErrArtifactNotInManifest)
	}
	return inManifest.Int64, nil
}
