package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// HostGroup is a physical host's capacity.
type HostGroup struct {
	ID           int64  `db:"id"`
	Name         string `db:"name"`
	SlotCapacity int    `db:"slot_capacity"`
	Revision     int64  `db:"revision"`
	SlotsBusy    int    `db:"slots_busy"`
}

// CreateHostGroup adds a host group.
func (s *Nodes) CreateHostGroup(ctx context.Context, name string, capacity int, actor string) (HostGroup, error) {
	if !nameRE.MatchString(name) {
		return HostGroup{}, jobdb.Invalid("name", "must match %s", nameRE)
	}
	if capacity < 1 || capacity > 4096 {
		return HostGroup{}, jobdb.Invalid("slotCapacity", "must be 1..4096")
	}
	var g HostGroup
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO judge_host_group (name, slot_capacity) VALUES (?, ?)`, name, capacity)
		if jobdb.IsDuplicate(err) {
			return jobdb.Conflict("host group %q exists", name)
		}
		if err != nil {
			return fmt.Errorf("store: create host group: %w", err)
		}
		id, _ := r.LastInsertId()
		g = HostGroup{ID: id, Name: name, SlotCapacity: capacity, Revision: 1}
		return jobdb.Audit(ctx, tx, actor, "host_group.create", 0, 0, "", map[string]any{"hostGroupId": id, "slotCapacity": capacity})
	})
	return g, err
}

// ResizeHostGroup changes a group's capacity if revision is current. Lowering
// it never stops running jobs; it only stops new claims until in-flight
// work drains below the new capacity.
func (s *Nodes) ResizeHostGroup(ctx context.Context, id int64, capacity int, revision int64, actor, reason string) (HostGroup, error) {
	if capacity < 0 || capacity > 4096 {
		return HostGroup{}, jobdb.Invalid("slotCapacity", "must be 0..4096")
	}
	var g HostGroup
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		err := s.db.Txx(tx).GetContext(ctx, &g,
			`SELECT id, name, slot_capacity, revision FROM judge_host_group WHERE id = ? FOR UPDATE`, id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("host group %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: resize host group: %w", err)
		}
		if g.Revision != revision {
			return jobdb.Conflict("host group %d is at revision %d, not %d", id, g.Revision, revision)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_host_group SET slot_capacity = ?, revision = revision + 1, updated_at = NOW(6) WHERE id = ?`,
			capacity, id); err != nil {
			return fmt.Errorf("store: resize host group: %w", err)
		}
		old := g.SlotCapacity
		g.SlotCapacity, g.Revision = capacity, g.Revision+1
		return jobdb.Audit(ctx, tx, actor, "host_group.resize", 0, 0, reason, map[string]any{"hostGroupId": id, "from": old, "to": capacity})
	})
	return g, err
}

// HostGroupDetail is a host group with its node count and timestamps.
type HostGroupDetail struct {
	HostGroup
	NodeCount int       `db:"node_count"`
	CreatedAt time.Time `db:"created_at"`
	UpdatedAt time.Time `db:"updated_at"`
}

// HostGroupDetails lists host groups (one when id > 0) with busy slots,
// node counts and timestamps.
func (s *Nodes) HostGroupDetails(ctx context.Context, id int64) ([]HostGroupDetail, error) {
	// Running jobs are counted in one grouped read (groupsRunningQuery),
	// not per group: there is no key on judge_job.host_group_id.
	q := `SELECT g.id, g.name, g.slot_capacity, g.revision,
	        COALESCE(b.busy, 0) AS slots_busy,
	        (SELECT COUNT(*) FROM judge_node n WHERE n.host_group_id = g.id) AS node_count,
	        g.created_at, g.updated_at
	      FROM judge_host_group g
	      LEFT JOIN (` + groupsRunningQuery + `) b ON b.host_group_id = g.id`
	var args []any
	if id > 0 {
		q += ` WHERE g.id = ?`
		args = append(args, id)
	}
	var out []HostGroupDetail
	if err := s.db.Pool.SelectContext(ctx, &out, q+` ORDER BY g.id`, args...); err != nil {
		return nil, fmt.Errorf("store: host groups: %w", err)
	}
	return out, nil
}
