// Package controltest starts a real control plane for tests: a fresh
// migrated database on the test MariaDB, an artifact store in a temp dir, a
// replica (control/replica) wired and run as kece-control serve wires it,
// and the HTTP server over it on a loopback port. Helpers seed what
// scenarios need.
package controltest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/replica"
	"github.com/kece-oj/kece/control/store"
)

// Options tune Start; zero values take test-friendly defaults.
type Options struct {
	Store store.Config
	HTTP  httpapi.Config
	// Replica tunes the replica (maintenance, poll intervals, metrics,
	// webhook); its Store is Options.Store, and its reap interval defaults
	// to 100ms.
	Replica replica.Config
	// Logger, when set, receives the replica's logs (tests of the log
	// format read them); otherwise they are discarded unless -v.
	Logger *slog.Logger
	// Mount, when set, mounts extra handlers (Server.Mount) before the
	// server starts; the replica is the one serving (for its store).
	Mount func(*httpapi.Server, *replica.Replica)
}

// Env is one running control plane.
type Env struct {
	T         testing.TB
	Ctx       context.Context
	DB        *sql.DB
	DSN       string
	Store     *store.Store
	Artifacts *artifact.Store
	Replica   *replica.Replica
	Server    *httpapi.Server
	HTTP      *httptest.Server
	URL       string
	Admin     string // admin token
	Business  string // business token
	opts      Options
	seq       *atomic.Int64
}

// Start runs a control plane until the test ends.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	db, dsn := dbtest.Open(t)
	return start(t, db, dsn, opts, nil, &atomic.Int64{})
}

func start(t testing.TB, db *sql.DB, dsn string, opts Options, arts *artifact.Store, seq *atomic.Int64) *Env {
	if opts.Store.LeaseTTL == 0 {
		opts.Store.LeaseTTL = 5 * time.Second
	}
	if opts.Store.BackoffBase == 0 {
		opts.Store.BackoffBase, opts.Store.BackoffMax = 10*time.Millisecond, 50*time.Millisecond
	}
	rc := opts.Replica
	rc.Store = opts.Store
	rc.Maintenance.ReapInterval = cmp.Or(rc.Maintenance.ReapInterval, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var err error
	if arts == nil {
		arts, err = artifact.OpenStore(ctx, artifact.StoreConfig{Root: t.TempDir()})
		must(t, err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Logger != nil {
		log = opts.Logger
	}
	rep, err := replica.New(rc, db, arts, log)
	must(t, err)
	srv, err := httpapi.New(opts.HTTP, rep.HTTPDeps(), log)
	must(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = rep.Run(ctx) }()
	if opts.Mount != nil {
		opts.Mount(srv, rep)
	}
	// The listener kece-control uses (header bounds included).
	h := srv.Handler()
	hs := httptest.NewUnstartedServer(h)
	hs.Config = httpapi.NewHTTPServer(h)
	hs.Start()
	t.Cleanup(func() { hs.Close(); cancel(); <-done })
	st := rep.Store()
	e := &Env{T: t, Ctx: ctx, DB: db, DSN: dsn, Store: st, Artifacts: arts, Replica: rep, Server: srv, HTTP: hs, URL: hs.URL, opts: opts, seq: seq}
	e.Admin, err = st.Tokens().CreateToken(ctx, store.TokenAdmin, fmt.Sprintf("admin-%d", seq.Add(1)))
	must(t, err)
	e.Business, err = st.Tokens().CreateToken(ctx, store.TokenBusiness, fmt.Sprintf("business-%d", seq.Add(1)))
	must(t, err)
	return e
}

// SecondReplica starts another control replica on the same database and
// artifact store, with its own connection pool, hub and reaper.
func (e *Env) SecondReplica() *Env {
	e.T.Helper()
	return start(e.T, dbtest.OpenDSN(e.T, e.DSN), e.DSN, e.opts, e.Artifacts, e.seq)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// PutArtifact stores and registers a file; returns its digest.
func (e *Env) PutArtifact(content []byte) string {
	e.T.Helper()
	sum := sha256.Sum256(content)
	d := hex.EncodeToString(sum[:])
	_, err := e.Artifacts.Put(e.Ctx, d, int64(len(content)), bytes.NewReader(content))
	must(e.T, err)
	must(e.T, e.Store.Manifests().RegisterArtifact(e.Ctx, d, int64(len(content))))
	return d
}

// Case is an input and expected output for PublishCode.
type Case struct {
	In, Out string
	Weight  int64
}

// PublishCode publishes a CODE manifest with the given cases.
func (e *Env) PublishCode(limits manifest.Limits, checker manifest.Checker, cases ...Case) int64 {
	e.T.Helper()
	return e.PublishCodeManifest(manifest.Manifest{Kind: manifest.KindCode, Limits: limits, Checker: checker}, cases...)
}

// PublishCodeManifest uploads the cases' data and publishes m with them
// (m carries everything else: limits, checker, file I/O).
func (e *Env) PublishCodeManifest(m manifest.Manifest, cases ...Case) int64 {
	e.T.Helper()
	for i, c := range cases {
		in, out := e.PutArtifact([]byte(c.In)), e.PutArtifact([]byte(c.Out))
		m.Cases = append(m.Cases, manifest.Case{CaseID: fmt.Sprintf("c%d", i+1), InputSha256: in, InputSize: int64(len(c.In)),
			OutputSha256: out, OutputSize: int64(len(c.Out)), Weight: c.Weight})
	}
	p, err := e.Store.Manifests().PublishManifest(e.Ctx, m)
	must(e.T, err)
	return p.ID
}

// Node is a registered node's join code and ids.
type Node struct {
	ID       int64
	GroupID  int64
	JoinCode string
}

// NewNode creates a host group (capacity groupSlots) and a node in it, and
// returns its one-time join code.
func (e *Env) NewNode(pool string, slots, groupSlots int) Node {
	e.T.Helper()
	g, err := e.Store.Nodes().CreateHostGroup(e.Ctx, fmt.Sprintf("host-%d", e.seq.Add(1)), groupSlots, "test")
	must(e.T, err)
	return e.NewNodeIn(g.ID, pool, slots)
}

// NewNodeIn creates a node in an existing host group.
func (e *Env) NewNodeIn(groupID int64, pool string, slots int) Node {
	e.T.Helper()
	n, code, err := e.Store.Nodes().CreateNode(e.Ctx, store.NodeSpec{Name: fmt.Sprintf("node-%d", e.seq.Add(1)), Pool: pool,
		HostGroupID: groupID, Slots: slots}, "test")
	must(e.T, err)
	return Node{ID: n.ID, GroupID: groupID, JoinCode: code.Code}
}

// ForceEnable enables a node without the self-check flow, for tests whose
// subject is not verification (verification has its own tests).
func (e *Env) ForceEnable(nodeID int64) {
	e.T.Helper()
	_, err := e.DB.ExecContext(e.Ctx, `UPDATE judge_node SET desired_state = 'ENABLED' WHERE id = ?`, nodeID)
	must(e.T, err)
}

// Enqueue enqueues a submission through the store (the business API has its
// own tests).
func (e *Env) Enqueue(typ, id, language, source string, manifestID int64) int64 {
	e.T.Helper()
	r, err := e.Store.Jobs().Enqueue(e.Ctx, store.EnqueueRequest{SubmissionType: typ, SubmissionID: id, Language: language,
		Source: source, ManifestID: manifestID})
	must(e.T, err)
	return r.JobID
}

// Bearer returns a request editor that sets the Authorization header.
func Bearer(token string) func(ctx context.Context, req *http.Request) error {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}
