package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/kece-oj/kece/contracts"
)

// Defaults for Config (DESIGN §6). The control plane's session answer can only
// shorten the heartbeat, renew and claim-wait intervals, never lengthen them.
const (
	HeartbeatIntervalDefault = contracts.HeartbeatIntervalDefault
	RenewIntervalDefault     = contracts.RenewIntervalDefault
	ClaimWaitDefault         = contracts.ClaimWaitMax
	// SafetyMarginDefault is subtracted from every lease's remaining time to
	// get the local deadline; it is capped at a quarter of the lease TTL.
	SafetyMarginDefault = 5 * time.Second
	// DrainGraceDefault is how long running jobs may finish after SIGTERM.
	DrainGraceDefault = 5 * time.Minute
	// RequestTimeoutDefault bounds one attempt of a call that keeps no
	// lease alive (session, join, release, the start of a download) and caps
	// every other deadline; see docs/node.md's timing table.
	RequestTimeoutDefault = 30 * time.Second
	// ClaimSlackDefault is added to a claim's wait for its deadline: a
	// replica that has not answered a long-poll by then is taken as hung.
	ClaimSlackDefault = time.Second
	// LivenessIntervalDefault is how often the replica holding a claim
	// long-poll is asked whether it lives (each check bounded by the same
	// time) when there is another replica to move to: a stopped replica
	// costs a waiting node about two intervals, not the long-poll's wait.
	// It follows a shorter request timeout down, like the claim slack.
	LivenessIntervalDefault = time.Second
	// HealthIntervalDefault is how often the pool's dependencies are probed;
	// heartbeats report the latest probe.
	HealthIntervalDefault = time.Minute
	// JanitorIntervalDefault is how often leftovers of dead leases are removed.
	JanitorIntervalDefault = 5 * time.Minute
	// RetryBaseDefault and RetryMaxDefault bound the jittered backoff of
	// retried calls (claim, renew, result, download).
	RetryBaseDefault = 200 * time.Millisecond
	RetryMaxDefault  = 5 * time.Second
	// CleanupTimeoutDefault bounds the wait for an executor to clean up after
	// its context was cancelled.
	CleanupTimeoutDefault = 30 * time.Second
	// ListenDefault serves /healthz and /metrics on loopback only.
	ListenDefault = "127.0.0.1:9464"
)

// ControlURLs splits a KECE_CONTROL_URL value into base URLs: one URL, or
// several replicas of one control plane separated by commas (spaces around
// them and trailing slashes are ignored).
func ControlURLs(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimRight(strings.TrimSpace(p), "/"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// validControlURLs refuses an empty list, a URL that is not http(s) with a
// host, and a replica listed twice.
func validControlURLs(name, v string) error {
	urls := ControlURLs(v)
	if len(urls) == 0 {
		return fmt.Errorf("%s is empty: want an http(s) URL such as https://control.example:8443, or several separated by commas", name)
	}
	var errs []error
	seen := map[string]bool{}
	for _, s := range urls {
		if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: %q must be an http(s) URL such as https://control.example:8443", name, s))
		} else if seen[strings.ToLower(u.Host)] {
			errs = append(errs, fmt.Errorf("%s lists %s twice", name, u.Host))
		} else {
			seen[strings.ToLower(u.Host)] = true
		}
	}
	return errors.Join(errs...)
}

// BackendFactory builds the pool's executor once the node knows its id (after
// the session opened). It is called exactly once per Run.
type BackendFactory func(ctx context.Context, nodeID string) (Backend, error)

// Config configures a Node. Parse env and flags in cmd/kece-node, not here.
type Config struct {
	// Pool is the pool this process serves; the credential's pool must match.
	Pool string
	// ControlURL is the control plane's base URL (scheme://host:port), or
	// several replicas' base URLs separated by commas (ControlURLs): the
	// node uses one at a time and moves to the next when it hangs or fails.
	ControlURL string
	// CredentialFile keeps the node credential (mode 0600). Required.
	CredentialFile string
	// JoinCode is used only when CredentialFile does not exist yet.
	JoinCode string
	// LocalSlots is how many jobs this host lets the node run at once; the
	// node runs min(LocalSlots, the admin's slots). Required, positive.
	LocalSlots int
	// CacheDir and CacheMaxBytes configure the artifact cache (0: default budget).
	CacheDir      string
	CacheMaxBytes int64
	// Listen is the address of /healthz and /metrics; empty disables them.
	Listen string
	// NewBackend builds the pool's executor. Required.
	NewBackend BackendFactory

	HeartbeatInterval time.Duration
	RenewInterval     time.Duration
	ClaimWait         time.Duration
	SafetyMargin      time.Duration
	DrainGrace        time.Duration
	RequestTimeout    time.Duration
	// ClaimSlack: a claim attempt's deadline is its wait plus this.
	ClaimSlack time.Duration
	// LivenessInterval: while a claim long-poll waits on a replica, that
	// replica is asked this often whether it lives (LivenessIntervalDefault).
	LivenessInterval time.Duration
	HealthInterval   time.Duration
	JanitorInterval  time.Duration
	RetryBase        time.Duration
	RetryMax         time.Duration
	CleanupTimeout   time.Duration

	// NoResultClaims posts results without a claim for the slot each frees
	// (the slot cycle), leaving all leasing to the claim loop.
	NoResultClaims bool

	// Version is this build's version, reported in heartbeats and /healthz.
	Version string
	// Logger receives one line per state change; nil: slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, HeartbeatIntervalDefault)
	def(&c.RenewInterval, RenewIntervalDefault)
	def(&c.ClaimWait, ClaimWaitDefault)
	def(&c.SafetyMargin, SafetyMarginDefault)
	def(&c.DrainGrace, DrainGraceDefault)
	def(&c.RequestTimeout, RequestTimeoutDefault)
	def(&c.ClaimSlack, min(ClaimSlackDefault, c.RequestTimeout))
	def(&c.LivenessInterval, min(LivenessIntervalDefault, c.RequestTimeout))
	def(&c.HealthInterval, HealthIntervalDefault)
	def(&c.JanitorInterval, JanitorIntervalDefault)
	def(&c.RetryBase, RetryBaseDefault)
	def(&c.RetryMax, RetryMaxDefault)
	def(&c.CleanupTimeout, CleanupTimeoutDefault)
	if c.Version == "" {
		c.Version = "dev"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate refuses a configuration the node cannot run with. Each message
// names the setting (as the env variable cmd/kece-node reads) and what would
// be right. Zero durations mean their defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !contracts.ValidPool(c.Pool) {
		bad("KECE_POOL %q is not a pool: want one of %s", c.Pool, strings.Join(contracts.Pools(), ", "))
	}
	if err := validControlURLs("KECE_CONTROL_URL", c.ControlURL); err != nil {
		errs = append(errs, err)
	}
	if c.CredentialFile == "" || !filepath.IsAbs(c.CredentialFile) {
		bad("KECE_CREDENTIAL_FILE %q must be an absolute file path (the credential is kept there, mode 0600)", c.CredentialFile)
	}
	if c.LocalSlots < 1 || c.LocalSlots > contracts.SlotsMax {
		bad("KECE_LOCAL_SLOTS %d must be 1..%d (there is no default: size it to the host)", c.LocalSlots, contracts.SlotsMax)
	}
	if c.CacheDir == "" || !filepath.IsAbs(c.CacheDir) {
		bad("KECE_CACHE_DIR %q must be an absolute directory path", c.CacheDir)
	}
	if c.CacheMaxBytes < 0 {
		bad("KECE_CACHE_MAX_BYTES %d must not be negative (0 takes the default)", c.CacheMaxBytes)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{
		{"heartbeat interval", c.HeartbeatInterval, 50 * time.Millisecond},
		{"renew interval", c.RenewInterval, 50 * time.Millisecond},
		{"claim wait", c.ClaimWait, 0},
		{"safety margin", c.SafetyMargin, 0},
		{"drain grace", c.DrainGrace, 0},
		{"request timeout", c.RequestTimeout, 100 * time.Millisecond},
		{"claim slack", c.ClaimSlack, 50 * time.Millisecond},
		{"liveness interval", c.LivenessInterval, livenessMin},
		{"health interval", c.HealthInterval, 50 * time.Millisecond},
		{"janitor interval", c.JanitorInterval, 50 * time.Millisecond},
		{"retry base", c.RetryBase, time.Millisecond},
		{"retry max", c.RetryMax, time.Millisecond},
		{"cleanup timeout", c.CleanupTimeout, 100 * time.Millisecond},
	} {
		if d.v != 0 && d.v < d.min || d.v < 0 {
			bad("%s %s must be at least %s (0 takes the default)", d.name, d.v, d.min)
		}
	}
	if c.ClaimWait > contracts.ClaimWaitMax {
		bad("claim wait %s must be at most %s (the protocol's bound)", c.ClaimWait, contracts.ClaimWaitMax)
	}
	if c.RetryBase > 0 && c.RetryMax > 0 && c.RetryMax < c.RetryBase {
		bad("retry max %s is below retry base %s", c.RetryMax, c.RetryBase)
	}
	errs = append(errs, c.timingRelations()...)
	return errors.Join(errs...)
}

// livenessMin is the shortest liveness interval: each check is bounded by
// it, and a healthy replica under load must answer a request that does
// nothing within it.
const livenessMin = 100 * time.Millisecond

// timingRelations checks how the timings bound one another (docs/node.md,
// "Timings"), with zero values taken as their defaults; the lease TTL comes
// from the session and is checked against them when it opens.
func (c Config) timingRelations() []error {
	or := func(v, d time.Duration) time.Duration { return cmp.Or(v, d) }
	req := or(c.RequestTimeout, RequestTimeoutDefault)
	slack := or(c.ClaimSlack, min(ClaimSlackDefault, req))
	renew := or(c.RenewInterval, RenewIntervalDefault)
	hb := or(c.HeartbeatInterval, HeartbeatIntervalDefault)
	base := or(c.RetryBase, RetryBaseDefault)
	live := or(c.LivenessInterval, min(LivenessIntervalDefault, req))
	deadline := or(c.ClaimWait, ClaimWaitDefault) + slack
	var errs []error
	if live >= deadline {
		errs = append(errs, fmt.Errorf("liveness interval %s must be shorter than a claim's deadline %s (claim wait + claim slack): "+
			"a long-poll's replica is checked while it waits, and a check that comes after the deadline finds nothing", live, deadline))
	}
	if live > req {
		errs = append(errs, fmt.Errorf("liveness interval %s must not exceed the request timeout %s: a stopped replica must cost a waiting "+
			"node less than any other call's deadline", live, req))
	}
	if slack > req {
		errs = append(errs, fmt.Errorf("claim slack %s must not exceed the request timeout %s: a claim's deadline is its wait plus the slack, "+
			"and a hung replica must not cost a long-poll more than any other call", slack, req))
	}
	if base > renew {
		errs = append(errs, fmt.Errorf("retry base %s must not exceed the renew interval %s: a failed renew is retried before the next periodic one", base, renew))
	}
	if base > hb {
		errs = append(errs, fmt.Errorf("retry base %s must not exceed the heartbeat interval %s", base, hb))
	}
	if c.SafetyMargin > 0 && c.SafetyMargin < minAttempt {
		errs = append(errs, fmt.Errorf("safety margin %s must be 0 (the default) or at least %s: it covers a claim answer's transit and the last renew attempt", c.SafetyMargin, minAttempt))
	}
	return errs
}
