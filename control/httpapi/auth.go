package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/kece-oj/kece/control/store"
)

type ctxKey int

const (
	sessionKey ctxKey = iota
	credentialKey
	tokenKey
)

// nodeAuth is default-deny for the whole machine prefix: every path needs a
// live session token except join (no auth) and session (a node credential,
// checked by the store when the session opens). A handler added later is
// covered without knowing about it.
func (s *Server) nodeAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case machinePrefix + "join":
			next.ServeHTTP(w, r)
			return
		case machinePrefix + "session":
			tok := bearer(r)
			if tok == "" {
				writeError(w, r, s.log, apiErr(http.StatusUnauthorized, codeCredentialInvalid, errors.New("a node credential is required")), surfaceMachine)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), credentialKey, tok)))
			return
		}
		info, err := s.store.AuthenticateSession(r.Context(), bearer(r))
		if err != nil {
			writeError(w, r, s.log, err, surfaceMachine)
			return
		}
		noteNode(r.Context(), idString(info.NodeID), info.Pool)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey, info)))
	})
}

func sessionFrom(ctx context.Context) (store.SessionInfo, error) {
	info, ok := ctx.Value(sessionKey).(store.SessionInfo)
	if !ok {
		return store.SessionInfo{}, apiErr(http.StatusUnauthorized, codeSessionInvalid, errors.New("no session"))
	}
	return info, nil
}

// tokenAuth admits only tokens of one kind; every other kind (and node
// credentials) is refused. public lists paths that need no token.
func (s *Server) tokenAuth(kind store.TokenKind, sf surface, public map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if public[r.URL.Path] && r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		// A console session's request, authenticated in process (inprocess.go).
		if id, ok := inProcessAdmin(r.Context()); ok && kind == store.TokenAdmin {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey, id)))
			return
		}
		id, err := s.store.AuthenticateToken(r.Context(), kind, bearer(r))
		if err != nil {
			writeError(w, r, s.log, err, sf)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey, id)))
	})
}

// tokenFrom returns the authenticated API caller.
func tokenFrom(ctx context.Context) store.TokenIdentity {
	id, _ := ctx.Value(tokenKey).(store.TokenIdentity)
	return id
}
