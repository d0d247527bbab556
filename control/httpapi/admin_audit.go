package httpapi

// Admin API: the global audit log, and the caller address its rows record.

import (
	"context"
	"net/http"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/store"
)

// withCaller hands the caller's address to the store, which writes it into
// every audit row of the request: the TCP peer's IP, or behind a trusted
// reverse proxy (Config.TrustedProxies) the client it names; a forwarded
// header from anyone else is never believed (control/forwarded).
func (s *Server) withCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(store.WithCaller(r.Context(), s.cfg.TrustedProxies.ClientIP(r))))
	})
}

// ListAudit lists every audit entry newest first, by actor, action, node,
// job and time, in keyset pages.
func (a jobsAdmin) ListAudit(ctx context.Context, req adminapi.ListAuditRequestObject) (adminapi.ListAuditResponseObject, error) {
	p := req.Params
	f := store.AuditFilter{Limit: pageLimit(p.Limit), After: optTime(p.After), Before: optTime(p.Before)}
	var err error
	if f.BeforeID, err = beforeID(p.BeforeId); err != nil {
		return nil, err
	}
	if f.NodeID, err = optID("nodeId", p.NodeId); err != nil {
		return nil, err
	}
	if f.JobID, err = optID("jobId", p.JobId); err != nil {
		return nil, err
	}
	if p.Actor != nil {
		f.Actor = *p.Actor
	}
	if p.Action != nil {
		f.Action = *p.Action
	}
	entries, err := a.s.store.AuditLog().ListAudit(ctx, f)
	if err != nil {
		return nil, filterErr(err)
	}
	out := adminapi.AuditList{Entries: make([]adminapi.AuditEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, auditOut(e))
	}
	if len(entries) == f.Limit {
		next := idString(entries[len(entries)-1].ID)
		out.NextBeforeId = &next
	}
	return adminapi.ListAudit200JSONResponse(out), nil
}
