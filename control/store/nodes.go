package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Node is the admin view of a node: configuration and observed health apart.
type Node struct {
	ID                int64
	Name              string
	Pool              string
	HostGroupID       int64
	DesiredState      NodeState
	Slots             int
	Revision          int64
	Address           string
	Revoked           bool
	HasCredential     bool
	SessionEpoch      int64
	Online            bool
	LastHeartbeatAge  *time.Duration
	RuntimeVersion    string
	Health            json.RawMessage
	SlotsBusy         int
	ReportedSlotsBusy int
	ReportedDraining  bool
	// DrainDeadlineAt is when a DRAINING node's remaining leases are taken
	// back and it is disabled (database clock); nil: no deadline.
	DrainDeadlineAt *time.Time
	CreatedAt       time.Time
}

// nodeColumns names every column of nodeRow; read with Get/Select.
const nodeColumns = `n.id, n.name, n.pool, n.host_group_id, n.desired_state, n.slots, n.revision,
  COALESCE(n.address, '') AS address, n.revoked_at IS NOT NULL AS revoked, n.credential_hash IS NOT NULL AS has_credential,
  n.session_epoch, TIMESTAMPDIFF(MICROSECOND, n.last_heartbeat_at, NOW(6)) AS heartbeat_age_us,
  COALESCE(n.reported_runtime, '') AS reported_runtime, COALESCE(n.reported_health, '') AS reported_health,
  COALESCE(n.reported_slots_busy, 0) AS reported_slots_busy, n.reported_draining,
  (SELECT COALESCE(SUM(j.slot_weight), 0) FROM judge_job j WHERE j.node_id = n.id AND j.state = 'RUNNING') AS slots_busy,
  IF(n.desired_state = 'DRAINING', n.drain_deadline_at, NULL) AS drain_deadline_at, n.created_at`

// nodeRow is one row of nodeColumns; node() derives what SQL leaves raw.
type nodeRow struct {
	ID                int64         `db:"id"`
	Name              string        `db:"name"`
	Pool              string        `db:"pool"`
	HostGroupID       int64         `db:"host_group_id"`
	DesiredState      NodeState     `db:"desired_state"`
	Slots             int           `db:"slots"`
	Revision          int64         `db:"revision"`
	Address           string        `db:"address"`
	Revoked           bool          `db:"revoked"`
	HasCredential     bool          `db:"has_credential"`
	SessionEpoch      int64         `db:"session_epoch"`
	HeartbeatAgeUS    sql.NullInt64 `db:"heartbeat_age_us"`
	RuntimeVersion    string        `db:"reported_runtime"`
	Health            string        `db:"reported_health"`
	ReportedSlotsBusy int           `db:"reported_slots_busy"`
	ReportedDraining  bool          `db:"reported_draining"`
	SlotsBusy         int           `db:"slots_busy"`
	DrainDeadlineAt   *time.Time    `db:"drain_deadline_at"`
	CreatedAt         time.Time     `db:"created_at"`
}

// node turns a row into the admin view: heartbeat age and online-ness are
// judged against this store's OfflineAfter.
func (s *core) node(r nodeRow) Node {
	n := Node{ID: r.ID, Name: r.Name, Pool: r.Pool, HostGroupID: r.HostGroupID, DesiredState: r.DesiredState,
		Slots: r.Slots, Revision: r.Revision, Address: r.Address, Revoked: r.Revoked, HasCredential: r.HasCredential,
		SessionEpoch: r.SessionEpoch, RuntimeVersion: r.RuntimeVersion, SlotsBusy: r.SlotsBusy,
		ReportedSlotsBusy: r.ReportedSlotsBusy, ReportedDraining: r.ReportedDraining, DrainDeadlineAt: r.DrainDeadlineAt,
		CreatedAt: r.CreatedAt}
	if r.HeartbeatAgeUS.Valid {
		d := time.Duration(r.HeartbeatAgeUS.Int64) * time.Microsecond
		n.LastHeartbeatAge = &d
		n.Online = d < s.db.Cfg.OfflineAfter && !n.Revoked
	}
	if r.Health != "" {
		n.Health = json.RawMessage(r.Health)
	}
	return n
}

// getNode reads one node through q (the pool, or a transaction with a lock
// suffix such as FOR UPDATE).
func (s *core) getNode(ctx context.Context, q sqlx.QueryerContext, id int64, suffix string) (Node, error) {
	var r nodeRow
	if err := sqlx.GetContext(ctx, q, &r, `SELECT `+nodeColumns+` FROM judge_node n WHERE n.id = ?`+suffix, id); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Node{}, fmt.Errorf("node %d: %w", id, ErrNotFound)
		}
		return Node{}, err
	}
	return s.node(r), nil
}

// GetNode reads one node.
func (s *Nodes) GetNode(ctx context.Context, id int64) (Node, error) {
	return s.nodeByID(ctx, id)
}

// nodeByID is GetNode for every aggregate.
func (s *core) nodeByID(ctx context.Context, id int64) (Node, error) {
	n, err := s.getNode(ctx, s.db.Pool, id, "")
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Node{}, fmt.Errorf("store: get node: %w", err)
	}
	return n, err
}

// ListNodes lists nodes, optionally of one pool and/or desired state.
func (s *Nodes) ListNodes(ctx context.Context, pool string, state NodeState) ([]Node, error) {
	q := `SELECT ` + nodeColumns + ` FROM judge_node n WHERE 1=1`
	var args []any
	if pool != "" {
		q += ` AND n.pool = ?`
		args = append(args, pool)
	}
	if state != "" {
		q += ` AND n.desired_state = ?`
		args = append(args, state)
	}
	var rows []nodeRow
	if err := s.db.Pool.SelectContext(ctx, &rows, q+` ORDER BY n.id`, args...); err != nil {
		return nil, fmt.Errorf("store: list nodes: %w", err)
	}
	out := make([]Node, len(rows))
	for i, r := range rows {
		out[i] = s.node(r)
	}
	return out, nil
}

// NodeTimes are a node's configuration timestamps.
type NodeTimes struct {
	UpdatedAt       time.Time  `db:"updated_at"`
	LastHeartbeatAt *time.Time `db:"last_heartbeat_at"`
}

// NodeTimestamps reads when a node's configuration last changed and when its
// last heartbeat arrived (database clock).
func (s *Nodes) NodeTimestamps(ctx context.Context, nodeID int64) (NodeTimes, error) {
	var t NodeTimes
	err := s.db.Pool.GetContext(ctx, &t, `SELECT updated_at, last_heartbeat_at FROM judge_node WHERE id = ?`, nodeID)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("store: node timestamps: %w", err)
	}
	return t, nil
}

// NodeSpec describes a node to create.
type NodeSpec struct {
	Name        string
	Pool        string
	HostGroupID int64
	Slots       int
	Address     string
	// JoinCodeTTL is the join code's lifetime; 0 takes the configured
	// default (1 h), at most JoinCodeTTLMax.
	JoinCodeTTL time.Duration
}

// CreateNode registers a node (PENDING_VERIFICATION) and issues its join code.
func (s *Nodes) CreateNode(ctx context.Context, spec NodeSpec, actor string) (Node, JoinCode, error) {
	if !nameRE.MatchString(spec.Name) {
		return Node{}, JoinCode{}, jobdb.Invalid("name", "must match %s", nameRE)
	}
	if !contracts.ValidPool(spec.Pool) {
		return Node{}, JoinCode{}, jobdb.Invalid("pool", "unknown pool %q (want one of %s)", spec.Pool, strings.Join(contracts.Pools(), ", "))
	}
	if spec.Slots < 1 || spec.Slots > contracts.SlotsMax {
		return Node{}, JoinCode{}, jobdb.Invalid("slots", "must be 1..%d", contracts.SlotsMax)
	}
	if len(spec.Address) > 255 {
		return Node{}, JoinCode{}, jobdb.Invalid("address", "at most 255 characters")
	}
	var id int64
	var code JoinCode
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var capacity int
		err := tx.QueryRowContext(ctx, `SELECT slot_capacity FROM judge_host_group WHERE id = ? FOR UPDATE`, spec.HostGroupID).Scan(&capacity)
		if errors.Is(err, sql.ErrNoRows) {
			return jobdb.Invalid("hostGroupId", "host group %d does not exist", spec.HostGroupID)
		}
		if err != nil {
			return fmt.Errorf("store: create node: %w", err)
		}
		if spec.Slots > capacity {
			return jobdb.Invalid("slots", "%d exceeds the host group's capacity of %d", spec.Slots, capacity)
		}
		r, err := tx.ExecContext(ctx,
			`INSERT INTO judge_node (name, pool, host_group_id, slots, address) VALUES (?, ?, ?, ?, NULLIF(?, ''))`,
			spec.Name, spec.Pool, spec.HostGroupID, spec.Slots, spec.Address)
		if jobdb.IsDuplicate(err) {
			return jobdb.Conflict("node %q exists", spec.Name)
		}
		if err != nil {
			return fmt.Errorf("store: create node: %w", err)
		}
		id, _ = r.LastInsertId()
		if code, err = s.issueJoinCode(ctx, tx, id, spec.JoinCodeTTL); err != nil {
			return err
		}
		return jobdb.Audit(ctx, tx, actor, "node.create", id, 0, "", map[string]any{"pool": spec.Pool, "slots": spec.Slots})
	})
	if err != nil {
		return Node{}, JoinCode{}, err
	}
	n, err := s.GetNode(ctx, id)
	return n, code, err
}

// changeNode runs fn with the node locked (after its host group when
// withGroup), then audits.
func (s *core) changeNode(ctx context.Context, nodeID int64, actor, action, reason string, fn func(tx *sql.Tx, n *Node) error) (Node, error) {
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		n, err := s.getNode(ctx, s.db.Txx(tx), nodeID, ` FOR UPDATE`)
		if errors.Is(err, ErrNotFound) {
			return err
		}
		if err != nil {
			return fmt.Errorf("store: %s: %w", action, err)
		}
		if err := fn(tx, &n); err != nil {
			return err
		}
		return jobdb.Audit(ctx, tx, actor, action, nodeID, 0, reason, nil)
	})
	if err != nil {
		return Node{}, err
	}
	return s.nodeByID(ctx, nodeID)
}

func setState(ctx context.Context, tx *sql.Tx, nodeID int64, st NodeState) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_node SET desired_state = ?, revision = revision + 1, updated_at = NOW(6) WHERE id = ?`, st, nodeID); err != nil {
		return fmt.Errorf("store: set node state: %w", err)
	}
	return nil
}

// Enable allows pool work, only after a fresh passing check and a fresh
// heartbeat that reports the runtime version the check ran with.
func (s *Nodes) Enable(ctx context.Context, nodeID int64, actor, reason string) (Node, error) {
	return s.changeNode(ctx, nodeID, actor, "node.enable", reason, func(tx *sql.Tx, n *Node) error {
		if n.Revoked {
			return jobdb.ConflictOf(ErrNodeRevoked, "node %d is revoked; rotate its credential first", nodeID)
		}
		if !n.Online {
			return jobdb.ConflictOf(ErrHeartbeatStale, "node %d has no fresh heartbeat", nodeID)
		}
		var checkRuntime string
		err := tx.QueryRowContext(ctx,
			`SELECT COALESCE(runtime_version, '') FROM judge_node_check
			 WHERE node_id = ? AND outcome = 'PASSED' AND finished_at > NOW(6) - INTERVAL ? MICROSECOND
			 ORDER BY id DESC LIMIT 1`, nodeID, jobdb.Micros(CheckFreshness)).Scan(&checkRuntime)
		if errors.Is(err, sql.ErrNoRows) {
			return jobdb.ConflictOf(ErrCheckRequired, "node %d has no passing self-check in the last %s; verify it first", nodeID, CheckFreshness)
		}
		if err != nil {
			return fmt.Errorf("store: enable: %w", err)
		}
		if checkRuntime != n.RuntimeVersion {
			return jobdb.ConflictOf(ErrCheckRequired, "node %d now reports runtime %q but was verified with %q; verify again", nodeID, n.RuntimeVersion, checkRuntime)
		}
		return setState(ctx, tx, nodeID, NodeEnabled)
	})
}

// Drain stops new pool work; running jobs finish.
func (s *Nodes) Drain(ctx context.Context, nodeID int64, actor, reason string) (Node, error) {
	return s.DrainUntil(ctx, nodeID, 0, actor, reason)
}

// DrainDeadlineMax bounds a drain deadline.
const DrainDeadlineMax = 7 * 24 * time.Hour

// DrainUntil drains the node with a deadline decided here, on the database
// clock: once deadline has passed, ExpireDrainDeadlines takes the node's
// remaining leases back and disables it. 0 means no deadline; draining again
// replaces (or removes) the deadline.
func (s *Nodes) DrainUntil(ctx context.Context, nodeID int64, deadline time.Duration, actor, reason string) (Node, error) {
	if deadline < 0 || deadline > DrainDeadlineMax {
		return Node{}, jobdb.Invalid("deadlineSeconds", "drain deadline %s must be 0..%s", deadline, DrainDeadlineMax)
	}
	var detail map[string]any
	if deadline > 0 {
		detail = map[string]any{"deadlineSeconds": int64(deadline / time.Second)}
	}
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var state NodeState
		err := tx.QueryRowContext(ctx, `SELECT desired_state FROM judge_node WHERE id = ? FOR UPDATE`, nodeID).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: drain: %w", err)
		}
		if state == NodeDisabled {
			return jobdb.Conflict("node %d is disabled", nodeID)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET desired_state = 'DRAINING', revision = revision + 1, updated_at = NOW(6),
			   drain_deadline_at = IF(? > 0, NOW(6) + INTERVAL ? MICROSECOND, NULL)
			 WHERE id = ?`, jobdb.Micros(deadline), jobdb.Micros(deadline), nodeID); err != nil {
			return fmt.Errorf("store: drain: %w", err)
		}
		return jobdb.Audit(ctx, tx, actor, "node.drain", nodeID, 0, reason, detail)
	})
	if err != nil {
		return Node{}, err
	}
	return s.nodeByID(ctx, nodeID)
}

// Disable stops the node. It is refused while the node holds live leases
// unless force is set with a reason; forcing never kills running jobs — their
// leases run out and are reaped.
func (s *Nodes) Disable(ctx context.Context, nodeID int64, force bool, actor, reason string) (Node, error) {
	if force && strings.TrimSpace(reason) == "" {
		return Node{}, jobdb.Invalid("reason", "a forced disable needs a reason")
	}
	return s.changeNode(ctx, nodeID, actor, "node.disable", reason, func(tx *sql.Tx, n *Node) error {
		var live int
		if err := tx.QueryRowContext(ctx,
			`SELECT COUNT(*) FROM judge_job WHERE node_id = ? AND state = 'RUNNING' AND lease_until > NOW(6)`, nodeID).Scan(&live); err != nil {
			return fmt.Errorf("store: disable: %w", err)
		}
		if live > 0 && !force {
			return jobdb.Conflict("node %d holds %d live leases; drain it first or force with a reason", nodeID, live)
		}
		return setState(ctx, tx, nodeID, NodeDisabled)
	})
}

// Revoke kills the credential and every session at once. Leases the node
// holds run out and are reaped.
func (s *Nodes) Revoke(ctx context.Context, nodeID int64, actor, reason string) (Node, error) {
	return s.changeNode(ctx, nodeID, actor, "node.revoke", reason, func(tx *sql.Tx, n *Node) error {
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET revoked_at = NOW(6), credential_hash = NULL, session_token_hash = NULL,
			   desired_state = 'DISABLED', revision = revision + 1, updated_at = NOW(6) WHERE id = ?`, nodeID); err != nil {
			return fmt.Errorf("store: revoke: %w", err)
		}
		_, err := tx.ExecContext(ctx,
			`UPDATE judge_join_code SET expires_at = LEAST(expires_at, NOW(6)) WHERE node_id = ? AND consumed_at IS NULL`, nodeID)
		return err
	})
}

// ResizeNode changes a node's slots if revision is current and the host group
// can hold it. Lowering slots never stops running jobs.
func (s *Nodes) ResizeNode(ctx context.Context, nodeID int64, slots int, revision int64, actor, reason string) (Node, error) {
	if slots < 1 || slots > contracts.SlotsMax {
		return Node{}, jobdb.Invalid("slots", "must be 1..%d", contracts.SlotsMax)
	}
	var groupID int64
	if err := s.db.Pool.QueryRowContext(ctx, `SELECT host_group_id FROM judge_node WHERE id = ?`, nodeID).Scan(&groupID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Node{}, fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
		}
		return Node{}, fmt.Errorf("store: resize node: %w", err)
	}
	var out Node
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		var capacity int
		if err := tx.QueryRowContext(ctx, `SELECT slot_capacity FROM judge_host_group WHERE id = ? FOR UPDATE`, groupID).Scan(&capacity); err != nil {
			return fmt.Errorf("store: resize node: %w", err)
		}
		var rev int64
		if err := tx.QueryRowContext(ctx, `SELECT revision FROM judge_node WHERE id = ? FOR UPDATE`, nodeID).Scan(&rev); err != nil {
			return fmt.Errorf("store: resize node: %w", err)
		}
		if rev != revision {
			return jobdb.Conflict("node %d is at revision %d, not %d", nodeID, rev, revision)
		}
		if slots > capacity {
			return jobdb.Invalid("slots", "%d exceeds the host group's capacity of %d", slots, capacity)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET slots = ?, revision = revision + 1, updated_at = NOW(6) WHERE id = ?`, slots, nodeID); err != nil {
			return fmt.Errorf("store: resize node: %w", err)
		}
		return jobdb.Audit(ctx, tx, actor, "node.resize", nodeID, 0, reason, map[string]any{"slots": slots})
	})
	if err != nil {
		return out, err
	}
	return s.nodeByID(ctx, nodeID)
}
