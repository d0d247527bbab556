package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/engine/sqljudge"
)

// Backend is the pool's executor plus what the node needs around it.
type Backend interface {
	engine.Executor
	// Runtime returns the runtime spec of a language id: one of the node's
	// own pool for submissions, or of another code pool for a special
	// checker written in that language. SQL backends return an error.
	Runtime(language string) (engine.RuntimeSpec, error)
	// Janitor removes leftovers (containers, temporary databases) of leases
	// that are not live; live answers from the node's own view.
	Janitor(ctx context.Context, live func(jobID string, leaseEpoch int64) bool) error
	// Health probes the dependencies (daemon and image, or judge database)
	// and reports them with the runtime version and the languages served.
	// It may take seconds; the node calls it on its own schedule, never
	// from /healthz.
	Health(ctx context.Context) Health
	// Close releases the executor.
	Close() error
}

// Health is the answer of one backend health probe.
type Health struct {
	// Runtime is the runtime version ("" when the probe could not learn it;
	// the node then keeps reporting the last known one).
	Runtime      string
	Dependencies []Dependency
	// Languages describes every language id the node serves, with the
	// version probed in its image ("" when the probe failed).
	Languages []LanguageReport
	// Features are the problem types the executor judges (never probed:
	// what this build of the engine supports).
	Features []string
}

// Dependency is the health of one local dependency, as heartbeats report it.
type Dependency struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	Detail  string `json:"detail,omitempty"`
}

// LanguageReport is what a node says about one language id it serves: what
// the control plane lists to the business (GET /api/v1/languages).
type LanguageReport struct {
	ID       string `json:"id"`
	Pool     string `json:"pool"`
	Standard string `json:"standard"`
	// Version is the first line of the runtime's version probe in the image.
	Version    string   `json:"version"`
	CompileCmd []string `json:"compileCommand,omitempty"`
	RunCmd     []string `json:"runCommand,omitempty"`
	// EntryRule is the file-name and entry-point rule, in words.
	EntryRule        string `json:"entryRule"`
	ExtraMemoryBytes int64  `json:"extraMemoryBytes"`
	MinMemoryBytes   int64  `json:"minMemoryBytes"`
}

// CodeBackendConfig configures the Docker executor of a code pool.
type CodeBackendConfig struct {
	Pool string
	// Executor is the code executor's configuration; NodeID is filled in.
	Executor code.Config
	// Image replaces the locally built image of the pool (an operator's
	// image pinned by digest) for every language id of the pool; empty
	// keeps code.ImageTag(Pool).
	Image string
	// WarmSandboxes is how many sandboxes of the pool's image the node
	// keeps started before their jobs (code.Executor.Prewarm); 0: none.
	WarmSandboxes int
}

// NewCodeBackend returns a factory for a code pool. It never touches SQL
// credentials; the Docker client is created only when the factory runs.
func NewCodeBackend(cfg CodeBackendConfig) (BackendFactory, error) {
	if cfg.Pool == string(machineapi.PoolMysql) || !contracts.ValidPool(cfg.Pool) {
		return nil, fmt.Errorf("code backend: %q is not a code pool (want cpp, java, python or arkts)", cfg.Pool)
	}
	specs, err := code.LanguagesOfPool(cfg.Pool)
	if err != nil {
		return nil, fmt.Errorf("code backend: %w", err)
	}
	langs := make(map[string]engine.RuntimeSpec, len(specs))
	for i := range specs {
		if cfg.Image != "" {
			specs[i].Image = cfg.Image
		}
		if err := specs[i].Validate(); err != nil {
			return nil, fmt.Errorf("code backend: %w", err)
		}
		langs[specs[i].Language] = specs[i]
	}
	return func(_ context.Context, nodeID string) (Backend, error) {
		ec := cfg.Executor
		ec.NodeID = nodeID
		x, err := code.New(ec)
		if err != nil {
			return nil, err
		}
		return &codeBackend{x: x, pool: cfg.Pool, order: specs, langs: langs, nodeID: nodeID, warm: cfg.WarmSandboxes}, nil
	}, nil
}

type codeBackend struct {
	x      *code.Executor
	pool   string
	order  []engine.RuntimeSpec          // the pool's languages, listing order
	langs  map[string]engine.RuntimeSpec // by id
	nodeID string
	swept  atomic.Bool
	warm   int
}

// prewarmer is a backend that starts sandboxes before their jobs arrive.
type prewarmer interface {
	// Prewarm keeps them ready until ctx ends, then removes those no job
	// took; it returns then.
	Prewarm(ctx context.Context)
}

// Prewarm keeps the configured number of started sandboxes of each image
// the pool's languages use (one image per pool unless an operator's
// differs), each started with the memory its first language compiles in.
func (b *codeBackend) Prewarm(ctx context.Context) {
	b.x.Prewarm(ctx, b.order, b.warm)
}

func (b *codeBackend) Execute(ctx context.Context, task engine.Task, p engine.ProgressSink) (engine.Verdict, error) {
	return b.x.Execute(ctx, task, p)
}

func (b *codeBackend) Runtime(language string) (engine.RuntimeSpec, error) {
	if rt, ok := b.langs[language]; ok {
		return rt, nil
	}
	// A special checker in another pool's language uses that pool's locally
	// built image, which must be present on this host.
	return code.RuntimeForLanguage(language)
}

// Janitor removes every container and work directory of this node but
// those of live leases on its first successful call, which the node makes
// at start before claiming: those of an earlier process are leftovers by
// definition. (When the daemon was down at start, the first success comes
// from the periodic call while jobs may run, which live keeps.) Later
// calls sweep only containers whose lease is not live: the executor
// removes its own on every path, but a removal during a Docker outage
// fails, and the container would otherwise run on until the node restarts.
func (b *codeBackend) Janitor(ctx context.Context, live func(string, int64) bool) error {
	if b.swept.Load() {
		_, err := b.x.Sweep(ctx, b.nodeID, live)
		return err
	}
	if _, err := b.x.Janitor(ctx, b.nodeID, live); err != nil {
		return err
	}
	b.swept.Store(true)
	return nil
}

// Health probes the daemon and each distinct (image, version probe) of the
// pool's languages once: a pool's ids share one image, so one sandbox start
// answers for all of them.
func (b *codeBackend) Health(ctx context.Context) Health {
	type probeKey struct{ image, probe string }
	versions := map[probeKey]string{}
	h := Health{Features: code.Features()}
	for _, rt := range b.order {
		k := probeKey{rt.Image, strings.Join(rt.VersionProbe, "\x00")}
		if _, done := versions[k]; done {
			continue
		}
		v, err := b.x.Probe(ctx, rt)
		if err != nil {
			name := "docker"
			if engine.ClassOf(err) == engine.InfraImageMissing {
				name = "image"
			}
			h.Dependencies = []Dependency{{Name: name, Healthy: false, Detail: clip(err.Error(), 1024)}}
			h.Runtime = ""
			h.Languages = b.reports(nil)
			return h
		}
		versions[k] = v
		if h.Runtime == "" {
			h.Runtime = v
		}
	}
	h.Dependencies = []Dependency{{Name: "docker", Healthy: true}, {Name: "image", Healthy: true, Detail: clip(b.order[0].Image, 1024)}}
	h.Languages = b.reports(func(rt engine.RuntimeSpec) string {
		return versions[probeKey{rt.Image, strings.Join(rt.VersionProbe, "\x00")}]
	})
	return h
}

// reports describes the pool's languages; version may be nil (unknown).
func (b *codeBackend) reports(version func(engine.RuntimeSpec) string) []LanguageReport {
	out := make([]LanguageReport, 0, len(b.order))
	for _, rt := range b.order {
		r := LanguageReport{ID: rt.Language, Pool: rt.Pool, Standard: rt.Standard, CompileCmd: rt.CompileCmd, RunCmd: rt.RunCmd,
			EntryRule: rt.EntryRule(), ExtraMemoryBytes: rt.ExtraMemoryBytes, MinMemoryBytes: rt.MinMemoryBytes}
		if version != nil {
			r.Version = version(rt)
		}
		out = append(out, r)
	}
	return out
}

func (b *codeBackend) Close() error { return b.x.Close() }

// SQLBackendConfig configures the SQL executor of the mysql pool.
type SQLBackendConfig struct {
	// Executor is the SQL executor's configuration (AdminDSN read from the
	// DSN file by the caller); NodeID is filled in.
	Executor sqljudge.Config
}

// NewSQLBackend returns a factory for the mysql pool. It never opens the
// Docker socket.
func NewSQLBackend(cfg SQLBackendConfig) (BackendFactory, error) {
	if strings.TrimSpace(cfg.Executor.AdminDSN) == "" {
		return nil, errors.New("sql backend: the judge MySQL DSN is empty (KECE_JUDGE_MYSQL_DSN_FILE)")
	}
	return func(_ context.Context, nodeID string) (Backend, error) {
		ec := cfg.Executor
		ec.NodeID = nodeID
		x, err := sqljudge.New(ec)
		if err != nil {
			return nil, err
		}
		return &sqlBackend{x: x}, nil
	}, nil
}

type sqlBackend struct{ x *sqljudge.Executor }

func (b *sqlBackend) Execute(ctx context.Context, task engine.Task, p engine.ProgressSink) (engine.Verdict, error) {
	return b.x.Execute(ctx, task, p)
}

func (b *sqlBackend) Runtime(language string) (engine.RuntimeSpec, error) {
	return engine.RuntimeSpec{}, fmt.Errorf("the mysql pool has no code runtime (asked for %q)", language)
}

func (b *sqlBackend) Janitor(ctx context.Context, live func(string, int64) bool) error {
	_, err := b.x.Janitor(ctx, live)
	return err
}

func (b *sqlBackend) Health(ctx context.Context) Health {
	h := Health{Features: sqljudge.Features()}
	r, err := b.x.SelfCheck(ctx)
	if err != nil {
		h.Dependencies = []Dependency{{Name: "judge_mysql", Healthy: false, Detail: clip(err.Error(), 1024)}}
	} else {
		h.Runtime = fmt.Sprintf("judge-mysql %s %s", r.Flavour, r.Version)
		h.Dependencies = []Dependency{{Name: "judge_mysql", Healthy: true}}
	}
	// The SQL ids come from the contract's table: the SQL executor has no
	// per-language spec (one judge database serves them all).
	for _, l := range contracts.Languages() {
		if l.Pool != string(machineapi.PoolMysql) {
			continue
		}
		h.Languages = append(h.Languages, LanguageReport{ID: l.ID, Pool: l.Pool, Standard: l.Standard, Version: h.Runtime,
			EntryRule:      "the SQL text is run as the judge user on a fresh temporary database of the problem's schema and seed",
			MinMemoryBytes: l.MinMemoryBytes})
	}
	return h
}

func (b *sqlBackend) Close() error { return b.x.Close() }

// clip bounds s to n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i]
}
