package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kece-oj/kece/control/manifest"
)

// RegisterArtifact records a stored file's digest and size (the bytes live in
// the artifact store). Registering the same digest twice is a no-op; a
// different size for the same digest is a conflict.
func (s *Store) RegisterArtifact(ctx context.Context, sha256 string, size int64) error {
	if !manifest.ValidDigest(sha256) || size < 0 {
		return invalid("sha256", "must be 64 lowercase hex with a non-negative size")
	}
	if _, err := s.db.ExecContext(ctx,
		`INSERT INTO judge_artifact (sha256, size) VALUES (?, ?) ON DUPLICATE KEY UPDATE sha256 = sha256`, sha256, size); err != nil {
		return fmt.Errorf("store: register artifact: %w", err)
	}
	var got int64
	if err := s.db.QueryRowContext(ctx, `SELECT size FROM judge_artifact WHERE sha256 = ?`, sha256).Scan(&got); err != nil {
		return fmt.Errorf("store: register artifact: %w", err)
	}
	if got != size {
		return conflict("artifact %s is registered with size %d, not %d", sha256, got, size)
	}
	return nil
}

// ArtifactSizes returns the registered size of each of the given digests
// that is registered; missing digests are absent from the map.
func (s *Store) ArtifactSizes(ctx context.Context, digests []string) (map[string]int64, error) {
	out := make(map[string]int64, len(digests))
	for start := 0; start < len(digests); start += 500 {
		q, args, err := sqlx.In(`SELECT sha256, size FROM judge_artifact WHERE sha256 IN (?)`, digests[start:min(start+500, len(digests))])
		if err != nil {
			return nil, fmt.Errorf("store: artifact sizes: %w", err)
		}
		var rows []struct {
			Digest string `db:"sha256"`
			Size   int64  `db:"size"`
		}
		if err := s.db.SelectContext(ctx, &rows, q, args...); err != nil {
			return nil, fmt.Errorf("store: artifact sizes: %w", err)
		}
		for _, r := range rows {
			out[r.Digest] = r.Size
		}
	}
	return out, nil
}

// PublishedManifest identifies a manifest.
type PublishedManifest struct {
	ID      int64
	Digest  string
	Created bool
}

// PublishManifest validates and stores an immutable manifest. Every referenced
// digest must be a registered artifact of the stated size. The same content
// publishes to the same manifest.
func (s *Store) PublishManifest(ctx context.Context, m manifest.Manifest) (PublishedManifest, error) {
	if err := m.Validate(); err != nil {
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
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, `SELECT id FROM judge_manifest WHERE digest = ?`, digest).Scan(&id)
		if err == nil {
			out = PublishedManifest{ID: id, Digest: digest}
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("store: publish manifest: %w", err)
		}
		for _, d := range digests {
			var size int64
			err := tx.QueryRowContext(ctx, `SELECT size FROM judge_artifact WHERE sha256 = ?`, d).Scan(&size)
			if errors.Is(err, sql.ErrNoRows) {
				return invalid("manifest", "artifact %s is not uploaded", d)
			}
			if err != nil {
				return fmt.Errorf("store: publish manifest: %w", err)
			}
			if size != want[d] {
				return invalid("manifest", "artifact %s has size %d, the manifest says %d", d, size, want[d])
			}
		}
		r, err := tx.ExecContext(ctx,
			`INSERT INTO judge_manifest (digest, kind, case_count, body) VALUES (?, ?, ?, ?)`,
			digest, m.Kind, len(m.Cases), body)
		if isDuplicate(err) {
			// A concurrent publish of the same content won; read its id.
			return tx.QueryRowContext(ctx, `SELECT id FROM judge_manifest WHERE digest = ?`, digest).Scan(&out.ID)
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

// Manifest reads a published manifest.
func (s *Store) Manifest(ctx context.Context, id int64) (manifest.Manifest, error) {
	return s.readManifest(ctx, s.db, id)
}

// StoredManifest is a published manifest with its identity.
type StoredManifest struct {
	ID        int64
	Digest    string
	CreatedAt time.Time
	Manifest  manifest.Manifest
}

// ManifestRecord reads a published manifest with its digest and creation
// time; ErrNotFound if there is none with that id.
func (s *Store) ManifestRecord(ctx context.Context, id int64) (StoredManifest, error) {
	var r struct {
		Digest    string    `db:"digest"`
		CreatedAt time.Time `db:"created_at"`
		Body      []byte    `db:"body"`
	}
	err := s.db.GetContext(ctx, &r, `SELECT digest, created_at, body FROM judge_manifest WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
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

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) readManifest(ctx context.Context, q queryer, id int64) (manifest.Manifest, error) {
	if m, ok := s.manifests.get(id); ok {
		return m, nil
	}
	var body []byte
	err := q.QueryRowContext(ctx, `SELECT body FROM judge_manifest WHERE id = ?`, id).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return manifest.Manifest{}, fmt.Errorf("manifest %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return manifest.Manifest{}, fmt.Errorf("store: manifest: %w", err)
	}
	m, err := manifest.Parse(body)
	if err != nil {
		return manifest.Manifest{}, fmt.Errorf("store: stored manifest %d does not parse: %w", id, err)
	}
	s.manifests.put(id, m)
	return m, nil
}

// ArtifactAccess is the answer to "may this lease download this digest".
var (
	// ErrArtifactNotInManifest: the digest is not referenced by the job's manifest.
	ErrArtifactNotInManifest = errors.New("artifact not in the job's manifest")
)

// CheckArtifactAccess allows a download only for a digest in the job's
// manifest and only while the session holds the given live lease.
func (s *Store) CheckArtifactAccess(ctx context.Context, sess NodeSession, jobID, leaseEpoch int64, sha256 string) (size int64, err error) {
	var live bool
	var inManifest sql.NullInt64
	err = s.db.QueryRowContext(ctx,
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
