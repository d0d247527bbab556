package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/control/internal/jobdb"
)

// Secret prefixes make leaked strings recognisable and carry the ids needed to
// tell "superseded" from "unknown" without storing secrets.
const (
	joinCodePrefix     = "kjc_"
	credentialPrefix   = "knc_"
	sessionTokenPrefix = "kns_"
)

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

// JoinCode is a one-time code, shown once.
type JoinCode struct {
	Code      string
	ExpiresIn time.Duration
}

// issueJoinCode issues a code valid for ttl (0: the configured default).
func (s *core) issueJoinCode(ctx context.Context, tx *sql.Tx, nodeID int64, ttl time.Duration) (JoinCode, error) {
	ttl = cmp.Or(ttl, s.db.Cfg.JoinCodeTTL)
	if ttl < time.Second || ttl > JoinCodeTTLMax {
		return JoinCode{}, jobdb.Invalid("joinCodeTtlSeconds", "join code lifetime %s must be 1s..%s", ttl, JoinCodeTTLMax)
	}
	// Earlier unused codes of this node stop working.
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_join_code SET expires_at = LEAST(expires_at, NOW(6)) WHERE node_id = ? AND consumed_at IS NULL`, nodeID); err != nil {
		return JoinCode{}, fmt.Errorf("store: join code: %w", err)
	}
	code, hash := newSecret(joinCodePrefix)
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO judge_join_code (node_id, code_hash, expires_at) VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND)`,
		nodeID, hash, jobdb.Micros(ttl)); err != nil {
		return JoinCode{}, fmt.Errorf("store: join code: %w", err)
	}
	return JoinCode{Code: code, ExpiresIn: ttl}, nil
}

// Admin node errors with their own API codes. They match ErrConflict too.
var (
	// ErrNodeAlreadyJoined: the node holds a credential; rotate it instead
	// of issuing a join code.
	ErrNodeAlreadyJoined = &ConflictError{Reason: "node already joined; rotate its credential instead"}
)

// IssueJoinCode issues a fresh join code for a node that has not joined yet
// (earlier unused codes stop working). A joined node is ErrNodeAlreadyJoined,
// a revoked one ErrNodeRevoked.
func (s *Credentials) IssueJoinCode(ctx context.Context, nodeID int64, actor, reason string) (JoinCode, error) {
	return s.IssueJoinCodeTTL(ctx, nodeID, 0, actor, reason)
}

// IssueJoinCodeTTL is IssueJoinCode with the code's lifetime chosen by the
// admin (0: the configured default; at most JoinCodeTTLMax).
func (s *Credentials) IssueJoinCodeTTL(ctx context.Context, nodeID int64, ttl time.Duration, actor, reason string) (JoinCode, error) {
	var code JoinCode
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		joined, revoked, err := lockNodeFlags(ctx, tx, nodeID)
		if err != nil {
			return err
		}
		switch {
		case revoked:
			return fmt.Errorf("node %d: %w", nodeID, ErrNodeRevoked)
		case joined:
			return fmt.Errorf("node %d: %w", nodeID, ErrNodeAlreadyJoined)
		}
		if code, err = s.issueJoinCode(ctx, tx, nodeID, ttl); err != nil {
			return err
		}
		return jobdb.Audit(ctx, tx, actor, "node.join_code", nodeID, 0, reason, map[string]any{"ttlSeconds": int64(code.ExpiresIn / time.Second)})
	})
	return code, err
}

// RotateCredential kills the node's credential and every session at once and
// issues a new join code; the node must join again. Live leases stay until
// they expire (the old session can no longer renew them) and are reaped.
func (s *Credentials) RotateCredential(ctx context.Context, nodeID int64, actor, reason string) (JoinCode, error) {
	return s.RotateCredentialTTL(ctx, nodeID, 0, actor, reason)
}

// RotateCredentialTTL is RotateCredential with the new join code's lifetime
// chosen by the admin (0: the configured default; at most JoinCodeTTLMax).
func (s *Credentials) RotateCredentialTTL(ctx context.Context, nodeID int64, ttl time.Duration, actor, reason string) (JoinCode, error) {
	var code JoinCode
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		_, revoked, err := lockNodeFlags(ctx, tx, nodeID)
		if err != nil {
			return err
		}
		if revoked {
			return fmt.Errorf("node %d: %w", nodeID, ErrNodeRevoked)
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE judge_node SET credential_hash = NULL, session_token_hash = NULL,
			   credential_version = credential_version + 1, updated_at = NOW(6) WHERE id = ?`, nodeID); err != nil {
			return fmt.Errorf("store: rotate credential: %w", err)
		}
		if code, err = s.issueJoinCode(ctx, tx, nodeID, ttl); err != nil {
			return err
		}
		return jobdb.Audit(ctx, tx, actor, "node.rotate_credential", nodeID, 0, reason, nil)
	})
	return code, err
}

func lockNodeFlags(ctx context.Context, tx *sql.Tx, nodeID int64) (joined, revoked bool, err error) {
	err = tx.QueryRowContext(ctx,
		`SELECT credential_hash IS NOT NULL, revoked_at IS NOT NULL FROM judge_node WHERE id = ? FOR UPDATE`, nodeID).Scan(&joined, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, fmt.Errorf("node %d: %w", nodeID, ErrNotFound)
	}
	if err != nil {
		return false, false, fmt.Errorf("store: lock node: %w", err)
	}
	return joined, revoked, nil
}

// Joined is what a node receives once for a join code.
type Joined struct {
	Node       Node
	Credential string
}

// ErrJoinPoolMismatch: the join code belongs to a node of another pool than
// the joining process serves. The code is not spent.
var ErrJoinPoolMismatch = errors.New("join code belongs to a node of another pool")

// Join exchanges a one-time code for a node credential. Exactly one of
// several concurrent joins with the same code succeeds.
func (s *Credentials) Join(ctx context.Context, code string) (Joined, error) {
	return s.JoinPool(ctx, code, "")
}

// JoinPool is Join by a process that names its pool: a code of a node of
// another pool is refused with ErrJoinPoolMismatch and stays usable, so the
// right process can still join with it. An empty pool skips the check.
func (s *Credentials) JoinPool(ctx context.Context, code, pool string) (Joined, error) {
	if !strings.HasPrefix(code, joinCodePrefix) || len(code) > 128 {
		return Joined{}, fmt.Errorf("join code: %w", ErrUnauthenticated)
	}
	hash := hashSecret(code)
	var nodeID int64
	var cred string
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
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
		var nodePool string
		if err := tx.QueryRowContext(ctx, `SELECT pool FROM judge_node WHERE id = ? FOR UPDATE`, nodeID).Scan(&nodePool); err != nil {
			return fmt.Errorf("store: join: lock node %d: %w", nodeID, err)
		}
		// A spent or expired code says so first; a usable code of another
		// pool is refused before anything is written.
		if pool != "" && pool != nodePool && !used && !expired {
			return fmt.Errorf("%w: the code is for a %s node, the joining process serves %s", ErrJoinPoolMismatch, nodePool, pool)
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
		return jobdb.Audit(ctx, tx, "node:"+strconv.FormatInt(nodeID, 10), "node.join", nodeID, 0, "", nil)
	})
	if err != nil {
		return Joined{}, err
	}
	n, err := s.nodeByID(ctx, nodeID)
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
	// RequeuedLeases counts the leases of the node's earlier boot that
	// opening this session took back.
	RequeuedLeases int
}

// OpenSession authenticates a credential and opens a session for a boot. The
// same boot id keeps its epoch (a retried open gets a fresh token for the
// same session); a new boot increments the epoch, and every call with the
// older session is refused from then on. A new boot also takes back, in the
// same transaction, every lease the earlier session still holds (that
// process is gone or must stop), so its jobs run again at once rather than
// when their leases run out; the old epoch can never commit them.
func (s *Credentials) OpenSession(ctx context.Context, credential, bootID string) (Session, error) {
	ids, ok := secretIDs(credential, credentialPrefix, 1)
	if !ok {
		return Session{}, fmt.Errorf("credential: %w", ErrUnauthenticated)
	}
	if bootID == "" || len(bootID) > 64 {
		return Session{}, jobdb.Invalid("bootId", "must be 1..64 characters")
	}
	var out Session
	var pools map[string]bool
	err := s.db.InTx(ctx, func(tx *sql.Tx) error {
		out, pools = Session{}, nil
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
		newBoot := !oldBoot.Valid || oldBoot.String != bootID
		if newBoot {
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
		if !newBoot {
			return nil
		}
		pools, out.RequeuedLeases, err = s.leases.RequeueOldSession(ctx, tx, out.NodeID, out.SessionEpoch)
		return err
	})
	if err != nil {
		return Session{}, err
	}
	for p := range pools {
		s.db.Notify(p)
	}
	return out, nil
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
func (s *Credentials) AuthenticateSession(ctx context.Context, token string) (SessionInfo, error) {
	ids, ok := secretIDs(token, sessionTokenPrefix, 2)
	if !ok {
		return SessionInfo{}, fmt.Errorf("session: %w", ErrUnauthenticated)
	}
	var si SessionInfo
	var hash []byte
	var revoked bool
	err := s.db.Pool.QueryRowContext(ctx,
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
	// Languages is the per-language report; nil keeps the previous one.
	Languages []LanguageReport
	// Features are the problem types the node judges (contracts.Features);
	// nil keeps the previous report (a node that never sent one judges
	// classic batch only).
	Features []string
}

// Heartbeat records observed health with the server clock and returns the
// node's desired configuration.
func (s *Credentials) Heartbeat(ctx context.Context, sess NodeSession, r HeartbeatReport) (Node, error) {
	if len(r.RuntimeVersion) > 255 {
		return Node{}, jobdb.Invalid("runtimeVersion", "at most 255 characters")
	}
	if len(r.Health) > 16<<10 {
		return Node{}, jobdb.Invalid("dependencies", "at most 16 KiB")
	}
	langs, err := checkLanguageReports(r.Languages)
	if err != nil {
		return Node{}, err
	}
	langCaps, featCaps, err := reportedCaps(r.Languages, r.Features)
	if err != nil {
		return Node{}, err
	}
	res, err := s.db.Pool.ExecContext(ctx,
		`UPDATE judge_node SET last_heartbeat_at = NOW(6), reported_runtime = ?, reported_health = ?,
		   reported_slots_busy = ?, reported_draining = ?, reported_languages = COALESCE(?, reported_languages),
		   caps_languages = COALESCE(?, caps_languages), caps_features = COALESCE(?, caps_features)
		 WHERE id = ? AND session_epoch = ? AND revoked_at IS NULL`,
		r.RuntimeVersion, string(r.Health), r.SlotsBusy, r.Draining, langs, langCaps, featCaps, sess.NodeID, sess.SessionEpoch)
	if err != nil {
		return Node{}, fmt.Errorf("store: heartbeat: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// The session was authenticated before this statement; a revoke
		// that committed in between must still read as a revoke (the node
		// stops for good), not as a newer boot.
		var revoked bool
		var epoch int64
		err := s.db.Pool.QueryRowContext(ctx, `SELECT revoked_at IS NOT NULL, session_epoch FROM judge_node WHERE id = ?`, sess.NodeID).Scan(&revoked, &epoch)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return Node{}, fmt.Errorf("store: heartbeat: %w", err)
		}
		if err := jobdb.SessionError(sess, err == nil, revoked, epoch); err != nil {
			return Node{}, err
		}
		// Revoked or replaced and then restored between the two reads:
		// still not this heartbeat's session any more.
		return Node{}, fmt.Errorf("node %d session %d: %w", sess.NodeID, sess.SessionEpoch, ErrSessionSuperseded)
	}
	return s.nodeByID(ctx, sess.NodeID)
}
