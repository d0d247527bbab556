package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Paths the console serves.
const (
	// Prefix is where the console lives; kece-control mounts Handler there.
	Prefix = "/console/"
	// StatusPath is the public status page.
	StatusPath = "/status"

	maxFormBytes  = 64 << 10
	sessionCookie = "kece_console"
	loginCookie   = "kece_console_login"
	// apiBase is what the generated clients put before every path; the
	// in-process transport never resolves it.
	apiBase = "http://kece-control.internal"
)

// Console serves the admin console and the public status page of one
// control replica.
type Console struct {
	cfg      Config
	store    *store.Store
	admin    *adminapi.ClientWithResponses
	business *businessapi.ClientWithResponses
	pages    pages
	log      *slog.Logger
	handler  http.Handler
}

// New builds the console. api is this replica's API handler
// (httpapi.Server.Handler): every read and action of the console is an API
// request served by it in process.
func New(cfg Config, st *store.Store, api http.Handler, log *slog.Logger) (*Console, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	hc := &http.Client{Transport: httpapi.InProcessTransport(api)}
	admin, err := adminapi.NewClientWithResponses(apiBase, adminapi.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("console: admin client: %w", err)
	}
	business, err := businessapi.NewClientWithResponses(apiBase, businessapi.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("console: business client: %w", err)
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, store: st, admin: admin, business: business, pages: p, log: log}
	c.handler = c.routes()
	return c, nil
}

// Handler serves Prefix and StatusPath.
func (c *Console) Handler() http.Handler { return c.handler }

func (c *Console) routes() http.Handler {
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", staticFiles(static)))
	mux.HandleFunc("GET "+StatusPath, c.status)
	mux.HandleFunc("GET "+Prefix+"login", c.loginPage)
	mux.HandleFunc("POST "+Prefix+"login", c.login)

	// Everything else needs a session; state-changing requests also the
	// session's CSRF token. A route added here is covered without knowing.
	in := http.NewServeMux()
	in.HandleFunc("POST "+Prefix+"logout", c.logout)
	in.HandleFunc("GET "+Prefix+"{$}", c.overview)
	in.HandleFunc("GET "+Prefix+"host-groups", c.hostGroups)
	in.HandleFunc("POST "+Prefix+"host-groups", c.createHostGroup)
	in.HandleFunc("POST "+Prefix+"host-groups/{id}/resize", c.resizeHostGroup)
	in.HandleFunc("GET "+Prefix+"nodes", c.nodes)
	in.HandleFunc("POST "+Prefix+"nodes", c.createNode)
	in.HandleFunc("GET "+Prefix+"nodes/{id}", c.node)
	in.HandleFunc("POST "+Prefix+"nodes/{id}/{action}", c.nodeAction)
	in.HandleFunc("GET "+Prefix+"jobs", c.jobs)
	in.HandleFunc("GET "+Prefix+"jobs/{id}", c.job)
	in.HandleFunc("POST "+Prefix+"jobs/{id}/{action}", c.jobAction)
	in.HandleFunc("GET "+Prefix+"events", c.events)
	in.HandleFunc("POST "+Prefix+"events/{id}/redeliver", c.redeliver)
	in.HandleFunc("GET "+Prefix+"webhooks", c.webhooks)
	in.HandleFunc("POST "+Prefix+"webhooks", c.setWebhook)
	in.HandleFunc("POST "+Prefix+"webhooks/{group}/rotate", c.rotateWebhook)
	in.HandleFunc("POST "+Prefix+"webhooks/{group}/delete", c.deleteWebhook)
	in.HandleFunc("GET "+Prefix+"reconcile", c.reconcile)
	in.HandleFunc("GET "+Prefix+"audit", c.audit)
	in.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, &apiError{Status: http.StatusNotFound, Code: "NOT_FOUND", Message: "no such console page"})
	})
	mux.Handle(Prefix, c.authed(in))
	return headers(mux)
}

// headers sets the security headers of every console and status response:
// scripts and styles only from our own files (no inline code at all), no
// framing, no MIME sniffing, no referrer, nothing cached.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, Prefix+"static/") {
			h.Set("Cache-Control", "no-store")
		}
		// Console forms are small; nothing larger is read.
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		next.ServeHTTP(w, r)
	})
}

func staticFiles(root fs.FS) http.Handler {
	fsrv := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=300")
		fsrv.ServeHTTP(w, r)
	})
}

type sessionKey struct{}

// session is the console session of an authenticated request.
func session(ctx context.Context) store.ConsoleSession {
	s, _ := ctx.Value(sessionKey{}).(store.ConsoleSession)
	return s
}

func (c *Console) limits() store.ConsoleSessionLimits {
	return store.ConsoleSessionLimits{Idle: c.cfg.SessionIdle, Absolute: c.cfg.SessionMax}
}

// authed refuses every request without a live session: a page is sent to
// the login form, anything else gets 401. A request that is not GET or HEAD
// must carry the session's CSRF token (compared in constant time), or 403.
func (c *Console) authed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sess store.ConsoleSession
		err := store.ErrConsoleSessionInvalid
		if ck, cerr := r.Cookie(sessionCookie); cerr == nil {
			sess, err = c.store.Tokens().ConsoleSessionBySecret(store.WithCaller(r.Context(), c.cfg.TrustedProxies.ClientIP(r)), ck.Value, c.limits())
		}
		if err != nil {
			if !errors.Is(err, store.ErrUnauthenticated) {
				c.log.Error("console session lookup", "err", err)
				c.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "sessions cannot be read now; try again"})
				return
			}
			c.clearCookie(w, r, sessionCookie)
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
				return
			}
			c.fail(w, r, &apiError{Status: http.StatusUnauthorized, Code: "UNAUTHENTICATED", Message: "log in first"})
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(sess.CSRF)) != 1 {
				c.fail(w, r, &apiError{Status: http.StatusForbidden, Code: "CSRF_INVALID",
					Message: "the form's security token is missing or stale; reload the page and try again"})
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	})
}

// api is the context for API calls made on behalf of the request's session:
// the admin token that opened it, from the browser's address.
func (c *Console) api(r *http.Request) context.Context {
	return httpapi.AsAdmin(r.Context(), session(r.Context()).Admin, c.cfg.TrustedProxies.ClientAddr(r))
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.cfg.TrustedProxies.Secure(r)})
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	c.setCookie(w, r, name, "", -1)
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, r, http.StatusOK, nil)
}

// showLogin renders the login form with a fresh login CSRF token, kept in
// a cookie of its own (double submit): there is no session yet to hold it.
func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, e *apiError) {
	tok := randomToken()
	c.setCookie(w, r, loginCookie, tok, 600)
	c.render(w, r, status, "login", view{Title: "Log in", CSRF: tok, Err: e})
}

// login opens a session for an admin token. Business tokens and node
// credentials never authenticate as admin tokens, so they cannot log in.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(loginCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(ck.Value)) != 1 {
		c.showLogin(w, r, http.StatusForbidden, &apiError{Status: http.StatusForbidden, Code: "CSRF_INVALID",
			Message: "the login form expired; try again"})
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	admin, err := c.store.Tokens().AuthenticateToken(r.Context(), store.TokenAdmin, tok)
	if err == nil {
		var sess store.ConsoleSession
		if sess, err = c.store.Tokens().OpenConsoleSession(r.Context(), admin, tok, c.cfg.TrustedProxies.ClientIP(r), c.limits()); err == nil {
			c.clearCookie(w, r, loginCookie)
			c.setCookie(w, r, sessionCookie, sess.Secret, int(c.cfg.SessionMax.Seconds()))
			c.log.Info("console login", "actor", admin.Actor(), "remote", c.cfg.TrustedProxies.ClientIP(r))
			http.Redirect(w, r, Prefix, http.StatusSeeOther)
			return
		}
	}
	if errors.Is(err, store.ErrUnauthenticated) {
		c.log.Warn("console login refused", "remote", c.cfg.TrustedProxies.ClientIP(r))
		code := "UNAUTHENTICATED"
		if errors.Is(err, store.ErrTokenExpired) {
			code = "TOKEN_EXPIRED"
		}
		c.showLogin(w, r, http.StatusUnauthorized, &apiError{Status: http.StatusUnauthorized, Code: code,
			Message: "not a valid admin token (business tokens and node credentials cannot log in)"})
		return
	}
	c.log.Error("console login", "err", err)
	c.showLogin(w, r, http.StatusServiceUnavailable, &apiError{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "cannot log in now; try again"})
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if err := c.store.Tokens().EndConsoleSession(r.Context(), ck.Value, c.cfg.TrustedProxies.ClientIP(r)); err != nil {
			c.log.Error("console logout", "err", err)
			c.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "cannot log out now; try again"})
			return
		}
	}
	c.clearCookie(w, r, sessionCookie)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}
