package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code"
	"github.com/kece-oj/kece/engine/sqljudge"
)

// Backend is the pool's executor plus what the node needs around it.
type Backend interface {
	engine.Executor
	// Runtime returns the runtime spec the node uses for pool (its own pool
	// for submissions, another code pool for a special checker). SQL
	// backends return an error.
	Runtime(pool string) (engine.RuntimeSpec, error)
	// Janitor removes leftovers (containers, temporary databases) of leases
	// that are not live; live answers from the node's own view.
	Janitor(ctx context.Context, live func(jobID string, leaseEpoch int64) bool) error
	// Health probes the dependencies (daemon and image, or judge database)
	// and returns the runtime version ("" when the probe could not learn it;
	// the node then keeps reporting the last known one). It may take
	// seconds; the node calls it on its own schedule, never from /healthz.
	Health(ctx context.Context) (runtime string, deps []Dependency)
	// Close releases the executor.
	Close() error
}

// Dependency is the health of one local dependency, as heartbeats report it.
type Dependency struct {
	Name    string `json:"name"`
	Healthy bool   `json:"healthy"`
	Detail  string `json:"detail,omitempty"`
}

// CodeBackendConfig configures the Docker executor of a code pool.
type CodeBackendConfig struct {
	Pool string
	// Executor is the code executor's configuration; NodeID is filled in.
	Executor code.Config
	// Runtime is the pool's runtime spec; zero takes code.DefaultRuntime(Pool).
	Runtime engine.RuntimeSpec
}

// NewCodeBackend returns a factory for a code pool. It never touches SQL
// credentials; the Docker client is created only when the factory runs.
func NewCodeBackend(cfg CodeBackendConfig) (BackendFactory, error) {
	if cfg.Pool == "mysql" || !ValidPool(cfg.Pool) {
		return nil, fmt.Errorf("code backend: %q is not a code pool (want cpp, java, python or arkts)", cfg.Pool)
	}
	rt := cfg.Runtime
	if rt.Image == "" {
		var err error
		if rt, err = code.DefaultRuntime(cfg.Pool); err != nil {
			return nil, fmt.Errorf("code backend: %w", err)
		}
	}
	if err := rt.Validate(); err != nil {
		return nil, fmt.Errorf("code backend: %w", err)
	}
	if rt.Pool != cfg.Pool {
		return nil, fmt.Errorf("code backend: runtime spec is for pool %q, node serves %q", rt.Pool, cfg.Pool)
	}
	return func(_ context.Context, nodeID string) (Backend, error) {
		ec := cfg.Executor
		ec.NodeID = nodeID
		x, err := code.New(ec)
		if err != nil {
			return nil, err
		}
		return &codeBackend{x: x, rt: rt, nodeID: nodeID}, nil
	}, nil
}

type codeBackend struct {
	x      *code.Executor
	rt     engine.RuntimeSpec
	nodeID string
	swept  atomic.Bool
}

func (b *codeBackend) Execute(ctx context.Context, task engine.Task, p engine.ProgressSink) (engine.Verdict, error) {
	return b.x.Execute(ctx, task, p)
}

func (b *codeBackend) Runtime(pool string) (engine.RuntimeSpec, error) {
	if pool == b.rt.Pool {
		return b.rt, nil
	}
	// A special checker in another language uses that pool's default image,
	// which must be present on this host.
	return code.DefaultRuntime(pool)
}

// Janitor removes every container labelled with this node on its first call,
// which the node makes at start before claiming: containers of an earlier
// process are leftovers by definition. Later calls do nothing, because the
// code executor labels containers by node only and removes its own on every
// path; a periodic sweep would kill live jobs.
func (b *codeBackend) Janitor(ctx context.Context, _ func(string, int64) bool) error {
	if b.swept.Load() {
		return nil
	}
	if _, err := b.x.Janitor(ctx, b.nodeID); err != nil {
		return err
	}
	b.swept.Store(true)
	return nil
}

func (b *codeBackend) Health(ctx context.Context) (string, []Dependency) {
	v, err := b.x.Probe(ctx, b.rt)
	if err != nil {
		name := "docker"
		if engine.ClassOf(err) == engine.InfraImageMissing {
			name = "image"
		}
		return "", []Dependency{{Name: name, Healthy: false, Detail: clip(err.Error(), 1024)}}
	}
	return v, []Dependency{{Name: "docker", Healthy: true}, {Name: "image", Healthy: true, Detail: clip(b.rt.Image, 1024)}}
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

func (b *sqlBackend) Runtime(pool string) (engine.RuntimeSpec, error) {
	return engine.RuntimeSpec{}, fmt.Errorf("the mysql pool has no code runtime (asked for %q)", pool)
}

func (b *sqlBackend) Janitor(ctx context.Context, live func(string, int64) bool) error {
	_, err := b.x.Janitor(ctx, live)
	return err
}

func (b *sqlBackend) Health(ctx context.Context) (string, []Dependency) {
	r, err := b.x.SelfCheck(ctx)
	if err != nil {
		return "", []Dependency{{Name: "judge_mysql", Healthy: false, Detail: clip(err.Error(), 1024)}}
	}
	return fmt.Sprintf("judge-mysql %s %s", r.Flavour, r.Version), []Dependency{{Name: "judge_mysql", Healthy: true}}
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
