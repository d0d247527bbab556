package jobdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// callerKey carries the caller's address into the store for the audit rows
// of one request (WithCaller).
type callerKey struct{}

// CallerAddrMax is judge_audit.remote_addr's width.
const CallerAddrMax = 64

// WithCaller returns a context whose audit rows record addr as the caller's
// address (the API layer sets it once per request, so no operation's
// signature has to carry it). An empty addr records none.
func WithCaller(ctx context.Context, addr string) context.Context {
	if len(addr) > CallerAddrMax {
		addr = addr[:CallerAddrMax]
	}
	return context.WithValue(ctx, callerKey{}, addr)
}

func callerFrom(ctx context.Context) string {
	addr, _ := ctx.Value(callerKey{}).(string)
	return addr
}

// Audit writes one audit row inside the caller's transaction, with the
// caller's address when the context carries one (WithCaller).
func Audit(ctx context.Context, tx *sql.Tx, actor, action string, nodeID, jobID int64, reason string, detail map[string]any) error {
	var d []byte
	if detail != nil {
		d, _ = json.Marshal(detail)
	}
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO judge_audit (actor, action, node_id, job_id, reason, detail, remote_addr)
		 VALUES (?, ?, NULLIF(?, 0), NULLIF(?, 0), ?, ?, NULLIF(?, ''))`,
		actor, action, nodeID, jobID, reason, d, callerFrom(ctx)); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	return nil
}

// ActorControl is the audit actor of what the control plane does by
// itself (a deadline passing), not on an admin's request.
const ActorControl = "control-plane"
