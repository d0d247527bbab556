package httpapi

// Admin API: the global audit log, and the caller address its rows record.

import (
	"context"
	"net"
	"net/http"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/control/store"
)

// CallerAddr is the address an audit row records for a request: the TCP
// peer's IP. No proxy is trusted to name another client (there is no
// trusted-proxy setting yet), so behind nginx this is the proxy's address;
// a forwarded header is never believed. Every surface that makes audited
// changes (the admin API, the console) records it through WithCaller.
func CallerAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// WithCaller hands the caller's address (CallerAddr) to the store, which
// writes it into every audit row of the request.
func WithCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(store.WithCaller(r.Context(), CallerAddr(r))))
	})
}

// ListAudit lists every audit entry newest first, by actor, action, node,
// job and time, in keyset pages.
func (a adminAPI) ListAudit(ctx context.Context, req adminapi.ListAuditRequestObject) (adminapi.ListAuditResponseObject, error) {
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
	entries, err := a.s.store.ListAudit(ctx, f)
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
