package jobdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/kece-oj/kece/control/manifest"
)

// Queryer reads one row, on the pool or inside a transaction.
type Queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// OwnedManifest is a parsed manifest with its owner, as cached.
type OwnedManifest struct {
	Manifest manifest.Manifest
	Owner    string
}

// ReadManifest returns manifest id, parsed, with its owner: from the
// cache, or read with q and cached (manifests never change).
func (s *Core) ReadManifest(ctx context.Context, q Queryer, id int64) (OwnedManifest, error) {
	if om, ok := s.Manifests.Get(id); ok {
		return om, nil
	}
	var body []byte
	var owner string
	err := q.QueryRowContext(ctx, `SELECT body, owner FROM judge_manifest WHERE id = ?`, id).Scan(&body, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return OwnedManifest{}, fmt.Errorf("manifest %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return OwnedManifest{}, fmt.Errorf("store: manifest: %w", err)
	}
	m, err := manifest.Parse(body)
	if err != nil {
		return OwnedManifest{}, fmt.Errorf("store: stored manifest %d does not parse: %w", id, err)
	}
	om := OwnedManifest{Manifest: m, Owner: owner}
	s.Manifests.Put(id, om)
	return om, nil
}
