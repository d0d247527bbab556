package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kece-oj/kece/control/manifest"
)

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
	out := StoredManifest{ID: id}
	var body []byte
	err := s.db.QueryRowContext(ctx, `SELECT digest, created_at, body FROM judge_manifest WHERE id = ?`, id).
		Scan(&out.Digest, &out.CreatedAt, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return StoredManifest{}, fmt.Errorf("manifest %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return StoredManifest{}, fmt.Errorf("store: manifest record: %w", err)
	}
	if out.Manifest, err = manifest.Parse(body); err != nil {
		return StoredManifest{}, fmt.Errorf("store: stored manifest %d does not parse: %w", id, err)
	}
	return out, nil
}

// ArtifactSizes returns the registered size of each of the given digests
// that is registered; missing digests are absent from the map.
func (s *Store) ArtifactSizes(ctx context.Context, digests []string) (map[string]int64, error) {
	out := make(map[string]int64, len(digests))
	for start := 0; start < len(digests); start += 500 {
		part := digests[start:min(start+500, len(digests))]
		args := make([]any, len(part))
		for i, d := range part {
			args[i] = d
		}
		in := strings.TrimSuffix(strings.Repeat("?, ", len(part)), ", ")
		rows, err := s.db.QueryContext(ctx, `SELECT sha256, size FROM judge_artifact WHERE sha256 IN (`+in+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("store: artifact sizes: %w", err)
		}
		for rows.Next() {
			var d string
			var n int64
			if err := rows.Scan(&d, &n); err != nil {
				rows.Close()
				return nil, fmt.Errorf("store: artifact sizes: %w", err)
			}
			out[d] = n
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("store: artifact sizes: %w", err)
		}
	}
	return out, nil
}

// AckOutcome says, per event id, whether an acknowledgement took effect.
type AckOutcome struct {
	// Acked: delivered and last leased to this consumer (now or by an
	// earlier acknowledgement — acknowledging is idempotent).
	Acked []int64
	// NotHeld: unknown ids, and events leased to another consumer or dead.
	NotHeld []int64
}

// AckEventsFor acknowledges events like AckEvents and reports each id.
func (s *Store) AckEventsFor(ctx context.Context, consumer string, ids []int64) (AckOutcome, error) {
	var out AckOutcome
	if len(ids) == 0 {
		return out, nil
	}
	if _, err := s.AckEvents(ctx, consumer, ids); err != nil {
		return out, err
	}
	in, args := inList(ids)
	rows, err := s.db.QueryContext(ctx,
		`SELECT id FROM judge_settlement_event WHERE id IN (`+in+`) AND state = 'DELIVERED' AND consumer = ?`,
		append(args, consumer)...)
	if err != nil {
		return out, fmt.Errorf("store: ack events: %w", err)
	}
	defer rows.Close()
	acked := make(map[int64]bool, len(ids))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return out, fmt.Errorf("store: ack events: %w", err)
		}
		acked[id] = true
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("store: ack events: %w", err)
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if acked[id] {
			out.Acked = append(out.Acked, id)
		} else {
			out.NotHeld = append(out.NotHeld, id)
		}
	}
	return out, nil
}
