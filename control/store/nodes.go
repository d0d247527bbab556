package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/control/manifest"
)

// Secret prefixes make leaked strings recognisable and carry the ids needed to
// tell "superseded" from "unknown" without storing secrets.
const (
	joinCodePrefix     = "kjc_"
	credentialPrefix   = "knc_"
	sessionTokenPrefix = "kns_"
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// newSecret returns prefix + ids + 256 random bits, and its SHA-256. Only the
// hash is stored; secrets are high-entropy, so a fast hash is enough.
func newSecret(prefix string, ids ...int64) (string, []byte) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	var sb strings.Builder
	sb.WriteString(prefix)
	for _, id := range ids {
		sb.WriteString(strconv.FormatInt(id, 10))
		sb.WriteByte('_')
	}
	sb.WriteString(base64.RawURLEncoding.EncodeToString(b[:]))
	s := sb.String()
	return s, hashSecret(s)
}

func hashSecret(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// secretIDs parses the ids embedded in a secret with the given prefix.
func secretIDs(s, prefix string, n int) ([]int64, bool) {
	if !strings.HasPrefix(s, prefix) {
		return nil, false
	}
	parts := strings.SplitN(strings.TrimPrefix(s, prefix), "_", n+1)
	if len(parts) != n+1 {
		return nil, false
	}
	ids := make([]int64, n)
	for i := 0; i < n; i++ {
		v, err := strconv.ParseInt(parts[i], 10, 64)
		if err != nil {
			return nil, false
		}
		ids[i] = v
	}
	return ids, true
}

// audit writes one audit row inside the caller's transaction.
func audit(ctx context.Context, tx *sql.Tx, actor, action string, nodeID, jobID int64, reason string, detail map[string]any) error {
	var d []byte
	if detail != nil {
		d, _ = json.Marshal(detail)
	}
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO judge_audit (actor, action, node_id, job_id, reason, detail) VALUES (?, ?, NULLIF(?, 0), NULLIF(?, 0), ?, ?)`,
		actor, action, nodeID, jobID, reason, d); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return nil
}

// HostGroup is a physical host's capacity.
type HostGroup struct {
	ID           int64
	Name         string
	SlotCapacity int
	Revision     int64
	SlotsBusy    int
}

// CreateHostGroup adds a host group.
func (s *Store) CreateHostGroup(ctx context.Context, name string, capacity int, actor string) (HostGroup, error) {
	if !nameRE.MatchString(name) {
		return HostGroup{}, invalid("name", "must match %s", nameRE)
	}
	if capacity < 1 || capacity > 4096 {
		return HostGroup{}, invalid("slotCapacity", "must be 1..4096")
	}
	var g HostGroup
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO judge_host_group (name, slot_capacity) VALUES (?, ?)`, name, capacity)
		if isDuplicate(err) {
			return conflict("host group %q exists", name)
		}
		if err != nil {
			return fmt.Errorf("store: create host group: %w", err)
		}
		id, _ := r.LastInsertId()
		g = HostGroup{ID: id, Name: name, SlotCapacity: capacity, Revision: 1}
		return audit(ctx, tx, actor, "host_group.create", 0, 0, "", map[string]any{"hostGroupId": id, "slotCapacity": capacity})
	})
	return g, err
}

// ListHostGroups lists host groups with their busy slots.
func (s *Store) ListHostGroups(ctx context.Context) ([]HostGroup, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (HostGroup, error) {
		var g HostGroup
		err := r.Scan(&g.ID, &g.Name, &g.SlotCapacity, &g.Revision, &g.SlotsBusy)
		return g, err
	}, `SELECT g.id, g.name, g.slot_capacity, g.revision,
	           (SELECT COUNT(*) FROM judge_job j WHERE j.host_group_id = g.id AND j.state = 'RUNNING')
	    FROM judge_host_group g ORDER BY g.id`)
	if err != nil {
		return nil, fmt.Errorf("store: list host groups: %w", err)
	}
	return out, nil
}

// ResizeHostGroup changes a group's capacity if revision is current. Lowering
// it never stops running jobs; it only stops new claims until in-flight
// work drains below the new capacity.
func (s *Store) ResizeHostGroup(ctx context.Context, id int64, capacity int, revision int64, actor, reason string) (HostGroup, error) {
	if capacity < 0 || capacity > 4096 {
		return HostGroup{}, invalid("slotCapacity", "must be 0..4096")
	}
	var g HostGroup
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx,
			`SELECT id, name, slot_capacity, revision FROM judge_host_group WHERE id = ? FOR UPDATE`, id).Scan(
			&g.ID, &g.Name, &g.SlotCapacity, &g.Revision)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("host group %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: resize host group: %w", err)
		}
		if g.Revision != revision {
			return conflict("host group %d is at revision %d, not %d", id, g.Revision, revision)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_host_group SET slot_capacity = ?, revision = revision + 1, updated_at = NOW(6) WHERE id = ?`,
			capacity, id); err != nil {
			return fmt.Errorf("store: resize host group: %w", err)
		}
		old := g.SlotCapacity
		g.SlotCapacity, g.Revision = capacity, g.Revision+1
		return audit(ctx, tx, actor, "host_group.resize", 0, 0, reason, map[string]any{"hostGroupId": id, "from": old, "to": capacity})
	})
	return g, err
}

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
	CreatedAt         time.Time
}

const nodeColumns = `n.id, n.name, n.pool, n.host_group_id, n.desired_state, n.slots, n.revision, COALESCE(n.address, ''),
  n.revoked_at IS NOT NULL, n.credential_hash IS NOT NULL, n.session_epoch,
  TIMESTAMPDIFF(MICROSECOND, n.last_heartbeat_at, NOW(6)), COALESCE(n.reported_runtime, ''),
  COALESCE(n.reported_health, ''), COALESCE(n.reported_slots_busy, 0), n.reported_draining,
  (SELECT COUNT(*) FROM judge_job j WHERE j.node_id = n.id AND j.state = 'RUNNING'), n.created_at`

func (s *Store) scanNode(sc rowScanner) (Node, error) {
	var n Node
	var hbAge sql.NullInt64
	var health string
	err := sc.Scan(&n.ID, &n.Name, &n.Pool, &n.HostGroupID, &n.DesiredState, &n.Slots, &n.Revision, &n.Address,
		&n.Revoked, &n.HasCredential, &n.SessionEpoch, &hbAge, &n.RuntimeVersion, &health, &n.ReportedSlotsBusy,
		&n.ReportedDraining, &n.SlotsBusy, &n.CreatedAt)
	if err != nil {
		return n, err
	}
	if hbAge.Valid {
		d := time.Duration(hbAge.Int64) * time.Microsecond
		n.LastHeartbeatAge = &d
		n.Online = d < s.cfg.OfflineAfter && !n.Revoked
	}
	if health != "" {
		n.Health = json.RawMessage(health)
	}
	return n, nil
}

// GetNode reads one node.
func (s *Store) GetNode(ctx context.Context, id int64) (Node, error) {
	n, err := s.scanNode(s.db.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM judge_node n WHERE n.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Node{}, fmt.Errorf("node %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Node{}, fmt.Errorf("store: get node: %w", err)
	}
	return n, nil
}

// ListNodes lists nodes, optionally of one pool and/or desired state.
func (s *Store) ListNodes(ctx context.Context, pool string, state NodeState) ([]Node, error) {
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
	out, err := queryAll(ctx, s.db, s.scanNode, q+` ORDER BY n.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list nodes: %w", err)
	}
	return out, nil
}

// NodeSpec describes a node to create.
type NodeSpec struct {
	Name        string
	Pool        string
	HostGroupID int64
	Slots       int
	Address     string
}

// JoinCode is a one-time code, shown once.
type JoinCode struct {
	Code      string
	ExpiresIn time.Duration
}

// CreateNode registers a node (PENDING_VERIFICATION) and issues its join code.
func (s *Store) CreateNode(ctx context.Context, spec NodeSpec, actor string) (Node, JoinCode, error) {
	if !nameRE.MatchString(spec.Name) {
		return Node{}, JoinCode{}, invalid("name", "must match %s", nameRE)
	}
	if !manifest.ValidPool(spec.Pool) {
		return Node{}, JoinCode{}, invalid("pool", "unknown pool %q (want one of %s)", spec.Pool, strings.Join(manifest.Pools(), ", "))
	}
	if spec.Slots < 1 || spec.Slots > 256 {
		return Node{}, JoinCode{}, invalid("slots", "must be 1..256")
	}
	if len(spec.Address) > 255 {
		return Node{}, JoinCode{}, invalid("address", "at most 255 characters")
	}
	var id int64
	var code JoinCode
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var capacity int
		err := tx.QueryRowContext(ctx, `SELECT slot_capacity FROM judge_host_group WHERE id = ? FOR UPDATE`, spec.HostGroupID).Scan(&capacity)
		if errors.Is(err, sql.ErrNoRows) {
			return invalid("hostGroupId", "host group %d does not exist", spec.HostGroupID)
		}
		if err != nil {
			return fmt.Errorf("store: create node: %w", err)
		}
		if spec.Slots > capacity {
			return invalid("slots", "%d exceeds the host group's capacity of %d", spec.Slots, capacity)
		}
		r, err := tx.ExecContext(ctx,
			`INSERT INTO judge_node (name, pool, host_group_id, slots, address) VALUES (?, ?, ?, ?, NULLIF(?, ''))`,
			spec.Name, spec.Pool, spec.HostGroupID, spec.Slots, spec.Address)
		if isDuplicate(err) {
			return conflict("node %q exists", spec.Name)
		}
		if err != nil {
			return fmt.Errorf("store: create node: %w", err)
		}
		id, _ = r.LastInsertId()
		if code, err = s.issueJoinCode(ctx, tx, id); err != nil {
			return err
		}
		return audit(ctx, tx, actor, "node.create", id, 0, "", map[string]any{"pool": spec.Pool, "slots": spec.Slots})
	})
	if err != nil {
		return Node{}, JoinCode{}, err
	}
	n, err := s.GetNode(ctx, id)
	return n, code, err
}

func (s *Store) issueJoinCode(ctx context.Context, tx *sql.Tx, nodeID int64) (JoinCode, error) {
	// Earlier unused codes of this node stop working.
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_join_code SET expires_at = LEAST(expires_at, NOW(6)) WHERE node_id = ? AND consumed_at IS NULL`, nodeID); err != nil {
		return JoinCode{}, fmt.Errorf("store: join code: %w", err)
	}
	code, hash := newSecret(joinCodePrefix)
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO judge_join_code (node_id, code_hash, expires_at) VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)`,
		nodeID, hash, micros(s.cfg.JoinCodeTTL)); err != nil {
		return JoinCode{}, fmt.Errorf("store: join code: %w", err)
	}
	return JoinCode{Code: code, ExpiresIn: s.cfg.JoinCodeTTL}, nil
}

// ResetJoinCode issues a fresh join code (earlier ones stop working). The
// current credential keeps working until the new code is used.
func (s *Store) ResetJoinCode(ctx context.Context, nodeID int64, actor, reason string) (JoinCode, error) {
	var code JoinCode
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := lockNode(ctx, tx, nodeID); err != nil {
			return err
		}
		var err error
		if code, err = s.issueJoinCode(ctx, tx, nodeID); err != nil {
			return err
		}
		return audit(ctx, tx, actor, "node.join_code", nodeID, 0, reason, nil)
	})
	return code, err
}

func lockNode(ctx context.Context, tx *sql.Tx, nodeID int64) error {
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM judge_node WHERE id = ? FOR UPDATE`, nodeID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: lock node: %w", err)
	}
	return nil
}

// Joined is what a node receives once for a join code.
type Joined struct {
	Node       Node
	Credential string
}

// Join exchanges a one-time code for a node credential. Exactly one of
// several concurrent joins with the same code succeeds.
func (s *Store) Join(ctx context.Context, code string) (Joined, error) {
	if !strings.HasPrefix(code, joinCodePrefix) || len(code) > 128 {
		return Joined{}, fmt.Errorf("join code: %w", ErrUnauthenticated)
	}
	hash := hashSecret(code)
	var nodeID int64
	var cred string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var expired, used bool
		err := tx.QueryRowContext(ctx,
			`SELECT node_id, expires_at <= NOW(6), consumed_at IS NOT NULL FROM judge_join_code WHERE code_hash = ?`, hash).Scan(
			&nodeID, &expired, &used)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("join code: %w", ErrUnauthenticated)
		}
		if err != nil {
			return fmt.Errorf("store: join: %w", err)
		}
		if err := lockNode(ctx, tx, nodeID); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx,
			`UPDATE judge_join_code SET consumed_at = NOW(6)
			 WHERE code_hash = ? AND consumed_at IS NULL AND expires_at > NOW(6)`, hash)
		if err != nil {
			return fmt.Errorf("store: join: %w", err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			// Re-read under the node lock: used wins over expired.
			_ = tx.QueryRowContext(ctx,
				`SELECT expires_at <= NOW(6), consumed_at IS NOT NULL FROM judge_join_code WHERE code_hash = ?`, hash).Scan(&expired, &used)
			if used {
				return ErrJoinCodeUsed
			}
			return ErrJoinCodeExpired
		}
		var h []byte
		cred, h = newSecret(credentialPrefix, nodeID)
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET credential_hash = ?, credential_version = credential_version + 1, revoked_at = NULL,
			   session_token_hash = NULL, updated_at = NOW(6)
			 WHERE id = ?`, h, nodeID); err != nil {
			return fmt.Errorf("store: join: %w", err)
		}
		return audit(ctx, tx, "node:"+strconv.FormatInt(nodeID, 10), "node.join", nodeID, 0, "", nil)
	})
	if err != nil {
		return Joined{}, err
	}
	n, err := s.GetNode(ctx, nodeID)
	return Joined{Node: n, Credential: cred}, err
}

// Session is an opened node session; Token is shown once.
type Session struct {
	NodeSession
	Token       string
	Pool        string
	HostGroupID int64
	State       NodeState
	Slots       int
}

// OpenSession authenticates a credential and opens a session for a boot. The
// same boot id keeps its epoch (a retried open gets a fresh token for the
// same session); a new boot increments the epoch, and every call with the
// older session is refused from then on.
func (s *Store) OpenSession(ctx context.Context, credential, bootID string) (Session, error) {
	ids, ok := secretIDs(credential, credentialPrefix, 1)
	if !ok {
		return Session{}, fmt.Errorf("credential: %w", ErrUnauthenticated)
	}
	if bootID == "" || len(bootID) > 64 {
		return Session{}, invalid("bootId", "must be 1..64 characters")
	}
	var out Session
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var hash []byte
		var revoked bool
		var oldBoot sql.NullString
		err := tx.QueryRowContext(ctx,
			`SELECT credential_hash, revoked_at IS NOT NULL, boot_id, session_epoch, pool, host_group_id, desired_state, slots
			 FROM judge_node WHERE id = ? FOR UPDATE`, ids[0]).Scan(
			&hash, &revoked, &oldBoot, &out.SessionEpoch, &out.Pool, &out.HostGroupID, &out.State, &out.Slots)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("credential: %w", ErrUnauthenticated)
		}
		if err != nil {
			return fmt.Errorf("store: open session: %w", err)
		}
		if revoked {
			return fmt.Errorf("node %d: %w", ids[0], ErrNodeRevoked)
		}
		if hash == nil || string(hash) != string(hashSecret(credential)) {
			return fmt.Errorf("credential: %w", ErrUnauthenticated)
		}
		if !oldBoot.Valid || oldBoot.String != bootID {
			out.SessionEpoch++
		}
		out.NodeID = ids[0]
		var th []byte
		out.Token, th = newSecret(sessionTokenPrefix, out.NodeID, out.SessionEpoch)
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET session_epoch = ?, session_token_hash = ?, boot_id = ?,
			   session_started_at = IF(boot_id <=> ?, session_started_at, NOW(6)), updated_at = NOW(6)
			 WHERE id = ?`, out.SessionEpoch, th, bootID, bootID, out.NodeID); err != nil {
			return fmt.Errorf("store: open session: %w", err)
		}
		return nil
	})
	return out, err
}

// SessionInfo is an authenticated session token's node.
type SessionInfo struct {
	NodeSession
	Pool        string
	HostGroupID int64
	State       NodeState
	Slots       int
}

// AuthenticateSession resolves a session token. A token of an older epoch is
// ErrSessionSuperseded; of a revoked node ErrNodeRevoked.
func (s *Store) AuthenticateSession(ctx context.Context, token string) (SessionInfo, error) {
	ids, ok := secretIDs(token, sessionTokenPrefix, 2)
	if !ok {
		return SessionInfo{}, fmt.Errorf("session: %w", ErrUnauthenticated)
	}
	var si SessionInfo
	var hash []byte
	var revoked bool
	err := s.db.QueryRowContext(ctx,
		`SELECT id, session_epoch, session_token_hash, revoked_at IS NOT NULL, pool, host_group_id, desired_state, slots
		 FROM judge_node WHERE id = ?`, ids[0]).Scan(
		&si.NodeID, &si.SessionEpoch, &hash, &revoked, &si.Pool, &si.HostGroupID, &si.State, &si.Slots)
	if errors.Is(err, sql.ErrNoRows) {
		return SessionInfo{}, fmt.Errorf("session: %w", ErrUnauthenticated)
	}
	if err != nil {
		return SessionInfo{}, fmt.Errorf("store: authenticate session: %w", err)
	}
	switch {
	case revoked:
		return SessionInfo{}, fmt.Errorf("node %d: %w", si.NodeID, ErrNodeRevoked)
	case hash != nil && string(hash) == string(hashSecret(token)):
		return si, nil
	case ids[1] < si.SessionEpoch:
		return SessionInfo{}, fmt.Errorf("node %d session %d: %w", si.NodeID, ids[1], ErrSessionSuperseded)
	}
	return SessionInfo{}, fmt.Errorf("session: %w", ErrUnauthenticated)
}

// HeartbeatReport is what a node reports about itself.
type HeartbeatReport struct {
	RuntimeVersion string
	Health         json.RawMessage
	SlotsBusy      int
	Draining       bool
}

// Heartbeat records observed health with the server clock and returns the
// node's desired configuration.
func (s *Store) Heartbeat(ctx context.Context, sess NodeSession, r HeartbeatReport) (Node, error) {
	if len(r.RuntimeVersion) > 255 {
		return Node{}, invalid("runtimeVersion", "at most 255 characters")
	}
	if len(r.Health) > 16<<10 {
		return Node{}, invalid("dependencies", "at most 16 KiB")
	}
	res, err := s.db.ExecContext(ctx,
		`UPDATE judge_node SET last_heartbeat_at = NOW(6), reported_runtime = ?, reported_health = ?,
		   reported_slots_busy = ?, reported_draining = ?
		 WHERE id = ? AND session_epoch = ? AND revoked_at IS NULL`,
		r.RuntimeVersion, string(r.Health), r.SlotsBusy, r.Draining, sess.NodeID, sess.SessionEpoch)
	if err != nil {
		return Node{}, fmt.Errorf("store: heartbeat: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Node{}, fmt.Errorf("node %d session %d: %w", sess.NodeID, sess.SessionEpoch, ErrSessionSuperseded)
	}
	return s.GetNode(ctx, sess.NodeID)
}

// changeNode runs fn with the node locked (after its host group when
// withGroup), then audits.
func (s *Store) changeNode(ctx context.Context, nodeID int64, actor, action, reason string, fn func(tx *sql.Tx, n *Node) error) (Node, error) {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		n, err := s.scanNode(tx.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM judge_node n WHERE n.id = ? FOR UPDATE`, nodeID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: %s: %w", action, err)
		}
		if err := fn(tx, &n); err != nil {
			return err
		}
		return audit(ctx, tx, actor, action, nodeID, 0, reason, nil)
	})
	if err != nil {
		return Node{}, err
	}
	return s.GetNode(ctx, nodeID)
}

func setState(ctx context.Context, tx *sql.Tx, nodeID int64, st NodeState) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_node SET desired_state = ?, revision = revision + 1, updated_at = NOW(6) WHERE id = ?`, st, nodeID); err != nil {
		return fmt.Errorf("store: set node state: %w", err)
	}
	return nil
}

// CheckFreshness is how recent a passing self-check must be to enable a node.
const CheckFreshness = 30 * time.Minute

// Enable allows pool work, only after a fresh passing check and a fresh
// heartbeat that reports the runtime version the check ran with.
func (s *Store) Enable(ctx context.Context, nodeID int64, actor, reason string) (Node, error) {
	return s.changeNode(ctx, nodeID, actor, "node.enable", reason, func(tx *sql.Tx, n *Node) error {
		if n.Revoked {
			return conflictOf(ErrNodeRevoked, "node %d is revoked; rotate its credential first", nodeID)
		}
		if !n.Online {
			return conflictOf(ErrHeartbeatStale, "node %d has no fresh heartbeat", nodeID)
		}
		var checkRuntime string
		err := tx.QueryRowContext(ctx,
			`SELECT COALESCE(runtime_version, '') FROM judge_node_check
			 WHERE node_id = ? AND outcome = 'PASSED' AND finished_at > NOW(6) - INTERVAL ? MICROSECOND
			 ORDER BY id DESC LIMIT 1`, nodeID, micros(CheckFreshness)).Scan(&checkRuntime)
		if errors.Is(err, sql.ErrNoRows) {
			return conflictOf(ErrCheckRequired, "node %d has no passing self-check in the last %s; verify it first", nodeID, CheckFreshness)
		}
		if err != nil {
			return fmt.Errorf("store: enable: %w", err)
		}
		if checkRuntime != n.RuntimeVersion {
			return conflictOf(ErrCheckRequired, "node %d now reports runtime %q but was verified with %q; verify again", nodeID, n.RuntimeVersion, checkRuntime)
		}
		return setState(ctx, tx, nodeID, NodeEnabled)
	})
}

// Drain stops new pool work; running jobs finish.
func (s *Store) Drain(ctx context.Context, nodeID int64, actor, reason string) (Node, error) {
	return s.changeNode(ctx, nodeID, actor, "node.drain", reason, func(tx *sql.Tx, n *Node) error {
		if n.DesiredState == NodeDisabled {
			return conflict("node %d is disabled", nodeID)
		}
		return setState(ctx, tx, nodeID, NodeDraining)
	})
}

// Disable stops the node. It is refused while the node holds live leases
// unless force is set with a reason; forcing never kills running jobs — their
// leases run out and are reaped.
func (s *Store) Disable(ctx context.Context, nodeID int64, force bool, actor, reason string) (Node, error) {
	if force && strings.TrimSpace(reason) == "" {
		return Node{}, invalid("reason", "a forced disable needs a reason")
	}
	return s.changeNode(ctx, nodeID, actor, "node.disable", reason, func(tx *sql.Tx, n *Node) error {
		var live int
		if err := tx.QueryRowContext(ctx,
			`SELECT COUNT(*) FROM judge_job WHERE node_id = ? AND state = 'RUNNING' AND lease_until > NOW(6)`, nodeID).Scan(&live); err != nil {
			return fmt.Errorf("store: disable: %w", err)
		}
		if live > 0 && !force {
			return conflict("node %d holds %d live leases; drain it first or force with a reason", nodeID, live)
		}
		return setState(ctx, tx, nodeID, NodeDisabled)
	})
}

// Revoke kills the credential and every session at once. Leases the node
// holds run out and are reaped.
func (s *Store) Revoke(ctx context.Context, nodeID int64, actor, reason string) (Node, error) {
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
func (s *Store) ResizeNode(ctx context.Context, nodeID int64, slots int, revision int64, actor, reason string) (Node, error) {
	if slots < 1 || slots > 256 {
		return Node{}, invalid("slots", "must be 1..256")
	}
	var groupID int64
	if err := s.db.QueryRowContext(ctx, `SELECT host_group_id FROM judge_node WHERE id = ?`, nodeID).Scan(&groupID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Node{}, fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
		}
		return Node{}, fmt.Errorf("store: resize node: %w", err)
	}
	var out Node
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var capacity int
		if err := tx.QueryRowContext(ctx, `SELECT slot_capacity FROM judge_host_group WHERE id = ? FOR UPDATE`, groupID).Scan(&capacity); err != nil {
			return fmt.Errorf("store: resize node: %w", err)
		}
		var rev int64
		if err := tx.QueryRowContext(ctx, `SELECT revision FROM judge_node WHERE id = ? FOR UPDATE`, nodeID).Scan(&rev); err != nil {
			return fmt.Errorf("store: resize node: %w", err)
		}
		if rev != revision {
			return conflict("node %d is at revision %d, not %d", nodeID, rev, revision)
		}
		if slots > capacity {
			return invalid("slots", "%d exceeds the host group's capacity of %d", slots, capacity)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET slots = ?, revision = revision + 1, updated_at = NOW(6) WHERE id = ?`, slots, nodeID); err != nil {
			return fmt.Errorf("store: resize node: %w", err)
		}
		return audit(ctx, tx, actor, "node.resize", nodeID, 0, reason, map[string]any{"slots": slots})
	})
	if err != nil {
		return out, err
	}
	return s.GetNode(ctx, nodeID)
}

// CheckRequest is a self-check to run on one node.
type CheckRequest struct {
	NodeID     int64
	ManifestID int64
	Language   string
	Source     string
}

// CheckStarted identifies a started self-check.
type CheckStarted struct {
	CheckID int64
	JobID   int64
}

// StartCheck creates a CHECK job bound to the node (it uses the node's
// capacity and never produces a business settlement event) and its check row.
func (s *Store) StartCheck(ctx context.Context, r CheckRequest, actor, reason string) (CheckStarted, error) {
	pool, err := manifest.PoolForLanguage(r.Language)
	if err != nil {
		return CheckStarted{}, invalid("language", "%v", err)
	}
	snapshot, _ := json.Marshal(Snapshot{Language: r.Language, Source: r.Source})
	var out CheckStarted
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var nodePool string
		var rev int64
		err := tx.QueryRowContext(ctx, `SELECT pool, revision FROM judge_node WHERE id = ? FOR UPDATE`, r.NodeID).Scan(&nodePool, &rev)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("node %d: %w", r.NodeID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if nodePool != pool {
			return invalid("language", "a %s check cannot run on a %s node", pool, nodePool)
		}
		var runtime string
		_ = tx.QueryRowContext(ctx, `SELECT COALESCE(reported_runtime, '') FROM judge_node WHERE id = ?`, r.NodeID).Scan(&runtime)
		cr, err := tx.ExecContext(ctx,
			`INSERT INTO judge_node_check (node_id, config_revision, runtime_version) VALUES (?, ?, ?)`, r.NodeID, rev, runtime)
		if err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		out.CheckID, _ = cr.LastInsertId()
		sid := strconv.FormatInt(out.CheckID, 10)
		if _, _, err := lockPointer(ctx, tx, CheckSubmissionType, sid); err != nil {
			return err
		}
		out.JobID, err = s.insertJob(ctx, tx, jobRow{
			submissionType: CheckSubmissionType, submissionID: sid, generation: 1, kind: KindCheck,
			pool: pool, language: r.Language, manifestID: r.ManifestID, snapshot: snapshot,
			digest: fmt.Sprintf("%x", sha256.Sum256(snapshot)), priority: -100, maxAttempts: 1, requiredNode: r.NodeID,
		})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_submission SET current_job_id = ?, generation = 1 WHERE submission_type = ? AND submission_id = ?`,
			out.JobID, CheckSubmissionType, sid); err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_node_check SET job_id = ? WHERE id = ?`, out.JobID, out.CheckID); err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE judge_node SET pending_checks = pending_checks + 1 WHERE id = ?`, r.NodeID); err != nil {
			return fmt.Errorf("store: start check: %w", err)
		}
		if err := audit(ctx, tx, actor, "node.verify", r.NodeID, out.JobID, reason, map[string]any{"checkId": out.CheckID}); err != nil {
			return err
		}
		return bumpPool(ctx, tx, pool)
	})
	if err == nil {
		s.notify(pool)
	}
	return out, err
}

// NodeCheck is one self-check run.
type NodeCheck struct {
	ID             int64
	JobID          int64
	ConfigRevision int64
	RuntimeVersion string
	Outcome        string
	Steps          json.RawMessage
	CreatedAt      time.Time
	FinishedAt     *time.Time
}

// Checks lists a node's recent self-checks.
func (s *Store) Checks(ctx context.Context, nodeID int64, limit int) ([]NodeCheck, error) {
	out, err := queryAll(ctx, s.db, func(r rowScanner) (NodeCheck, error) {
		var c NodeCheck
		var steps string
		err := r.Scan(&c.ID, &c.JobID, &c.ConfigRevision, &c.RuntimeVersion, &c.Outcome, &steps, &c.CreatedAt, &c.FinishedAt)
		if steps != "" {
			c.Steps = json.RawMessage(steps)
		}
		return c, err
	}, `SELECT id, COALESCE(job_id, 0), config_revision, COALESCE(runtime_version, ''), outcome, COALESCE(steps, ''),
	           created_at, finished_at
	    FROM judge_node_check WHERE node_id = ? ORDER BY id DESC LIMIT ?`, nodeID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: checks: %w", err)
	}
	return out, nil
}

// AuditEntry is one audit row.
type AuditEntry struct {
	ID        int64
	Actor     string
	Action    string
	NodeID    int64
	JobID     int64
	Reason    string
	Detail    json.RawMessage
	CreatedAt time.Time
}

// Audit lists recent audit rows of a node (nodeID > 0) or a job (jobID > 0).
func (s *Store) Audit(ctx context.Context, nodeID, jobID int64, limit int) ([]AuditEntry, error) {
	q := `SELECT id, actor, action, COALESCE(node_id, 0), COALESCE(job_id, 0), reason, COALESCE(detail, ''), created_at
	      FROM judge_audit WHERE `
	var arg int64
	if nodeID > 0 {
		q, arg = q+`node_id = ?`, nodeID
	} else {
		q, arg = q+`job_id = ?`, jobID
	}
	out, err := queryAll(ctx, s.db, func(r rowScanner) (AuditEntry, error) {
		var a AuditEntry
		var d string
		err := r.Scan(&a.ID, &a.Actor, &a.Action, &a.NodeID, &a.JobID, &a.Reason, &d, &a.CreatedAt)
		if d != "" {
			a.Detail = json.RawMessage(d)
		}
		return a, err
	}, q+` ORDER BY id DESC LIMIT ?`, arg, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	return out, nil
}
