package main

import (
	"bufio"
	"cmp"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kece-oj/kece/control/dbtest"
)

// server answers every connection with its name and closes it.
func server(t *testing.T, name string) net.Listener {
	t.Helper()
	return serveOn(t, name, "127.0.0.1:0", net.ListenConfig{})
}

// serveOn is server on addr, listening with lc.
func serveOn(t *testing.T, name, addr string, lc net.ListenConfig) net.Listener {
	t.Helper()
	ln, err := lc.Listen(t.Context(), "tcp", addr)
	require.NoError(t, err)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
	return ln
}

func ask(t *testing.T, addr string) string {
	t.Helper()
	line, err := tryAsk(addr)
	require.NoError(t, err)
	return line
}

// tryAsk is one connection through addr: the line it answers, or why not.
func tryAsk(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// reusePort lets several sockets of this process bind one port.
var reusePort = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
	return cmp.Or(err, serr)
}}

// reservePort binds a loopback port without listening on it: a dial to it is
// refused, as to a dead node, and no socket that does not share the port
// (SO_REUSEPORT, this process) can take it while the test runs — so a node
// that "dies" is not replaced by another test's listener on its address.
func reservePort(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.NoError(t, syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1))
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

func TestTCPFailoverMovesToNextLiveBackendAndStays(t *testing.T) {
	t.Parallel()
	a, b := serveOn(t, "a", reservePort(t), reusePort), server(t, "b")
	t.Cleanup(func() { b.Close() })
	p, err := newTCPFailover([]string{a.Addr().String(), b.Addr().String()})
	require.NoError(t, err)
	t.Cleanup(p.close)

	require.Equal(t, "a\n", ask(t, p.addr()))
	require.Equal(t, a.Addr().String(), p.current())

	// The preferred node dies: new connections go to the next one.
	aAddr := a.Addr().String()
	a.Close()
	if ln, err := net.Listen("tcp", aAddr); err == nil {
		ln.Close()
		t.Fatal("a dead node's address must not be taken by another listener during the test")
	}
	// A connection made as the node dies may still end without an answer
	// (two CI runs saw one EOF right after the close, never reproduced on
	// a quiet machine), as through any proxy; the next ones reach b.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		line, err := tryAsk(p.addr())
		assert.NoError(c, err)
		assert.Equal(c, "b\n", line)
	}, 5*time.Second, 10*time.Millisecond, "after a died, connections must reach b")
	require.Equal(t, b.Addr().String(), p.current())

	// It comes back on the same address: the writers stay where they are
	// (sticky), so they are not split across nodes again.
	back := serveOn(t, "a", aAddr, reusePort)
	t.Cleanup(func() { back.Close() })
	require.Equal(t, "b\n", ask(t, p.addr()))
}

func TestChaosConfigNamesWhatToFix(t *testing.T) {
	t.Parallel()
	base := func() chaosConfig {
		return chaosConfig{pools: "mysql,python", faults: "node_kill,db_restart", duration: time.Minute, warmup: 10 * time.Second,
			rate: 3, nodesPerPool: 2, slots: 2, every: 5 * time.Second, lease: 8 * time.Second, writers: "multi", urlList: "auto",
			timings: "short"}
	}
	ok := base()
	require.NoError(t, ok.validate())
	require.Equal(t, []string{"mysql", "python"}, ok.poolList)
	late := base()
	late.faults = strings.Join(chaosFaultKinds, ",")
	require.NoError(t, late.validate())
	require.Contains(t, late.faultList, faultLateClaims, "the stale claim copies are in the default mix")
	require.Equal(t, []string{"node_kill", "db_restart"}, ok.faultList)
	require.Equal(t, 12, ok.inFlight, "default in-flight is 3 × the pool's slots")
	d := base()
	d.timings, d.lease = "default", 0
	require.NoError(t, d.validate())
	require.Equal(t, 60*time.Second, d.lease, "the shipped lease with the shipped node timings")
	require.Empty(t, d.nodeTimings(), "nodes keep their defaults")
	require.Empty(t, d.replicaTimings(), "replicas keep their defaults")
	require.Equal(t, []string{"--heartbeat-interval", "1s"}, ok.nodeTimings())

	for name, tc := range map[string]struct {
		edit func(*chaosConfig)
		want string
	}{
		"unknown pool":    {func(c *chaosConfig) { c.pools = "mysql,cobol" }, `-pools: unknown pool "cobol"`},
		"three pools":     {func(c *chaosConfig) { c.pools = "mysql,python,cpp" }, "want one or two pools"},
		"unknown fault":   {func(c *chaosConfig) { c.faults = "node_kill,meteor" }, `-faults: unknown kind "meteor"`},
		"no fault window": {func(c *chaosConfig) { c.duration = 5 * time.Second }, "-duration 5s must exceed -warmup 10s"},
		"bad writers":     {func(c *chaosConfig) { c.galera = "scripts/galera.sh"; c.writers = "all" }, "-writers must be multi or single"},
		"bad url list":    {func(c *chaosConfig) { c.urlList = "maybe" }, "-node-url-list must be auto, on or off"},
		"short lease":     {func(c *chaosConfig) { c.lease = time.Second }, "-lease must be at least 3s"},
		"bad timings":     {func(c *chaosConfig) { c.timings = "fast" }, "-node-timings must be short or default"},
	} {
		c := base()
		tc.edit(&c)
		err := c.validate()
		require.Error(t, err, name)
		require.Contains(t, err.Error(), tc.want, name)
	}
	g := base()
	g.galera = "scripts/galera.sh"
	require.NoError(t, g.validate())
	require.Equal(t, []string{faultGaleraKill}, g.faultList, "the Galera run has one fault: the writers' node dies")
}

// The run's stale-claim count and freeze leasing figures, read from
// attempt rows as a run leaves them: a lease granted to a request id after
// its first grant is stale (the same grant's leases, and another node's
// request id that happens to match, are not), and the leased rates are per
// second over the freezes and the quiet before each, per pool and for the
// fleet.
func TestChaosStaleClaimsAndFreezeLeasing(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.Open(t)
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	n := 0
	attempt := func(pool string, node int64, req string, at time.Time) {
		t.Helper()
		n++
		res, err := db.ExecContext(t.Context(), `INSERT INTO judge_job (submission_type, submission_id, generation, kind, pool,
			runtime_spec, manifest_id, request_snapshot, request_digest, state, max_attempts)
			VALUES ('CHAOS', ?, 1, 'SUBMISSION', ?, 'x', 1, '{}', REPEAT('0', 64), 'COMPLETED', 3)`, fmt.Sprintf("sub-%d", n), pool)
		require.NoError(t, err)
		job, err := res.LastInsertId()
		require.NoError(t, err)
		_, err = db.ExecContext(t.Context(), `INSERT INTO judge_job_attempt (job_id, lease_epoch, node_id, host_group_id, session_epoch,
			started_at, claim_request_id) VALUES (?, 1, ?, 1, 1, ?, NULLIF(?, ''))`, job, node, at, req)
		require.NoError(t, err)
	}
	// One grant of two leases to claim-a, then a stale copy of claim-a
	// granted another; node 2's claim-a is its own; no request id (an old
	// node) is never stale.
	attempt("mysql", 1, "claim-a", t0.Add(-5*time.Second))
	attempt("mysql", 1, "claim-a", t0.Add(-5*time.Second))
	attempt("python", 1, "claim-a", t0.Add(time.Second))
	attempt("mysql", 2, "claim-a", t0.Add(2*time.Second))
	attempt("mysql", 1, "", t0.Add(3*time.Second))
	attempt("mysql", 1, "", t0.Add(3*time.Second))
	stale, err := staleClaimLeases(t.Context(), db)
	require.NoError(t, err)
	require.Equal(t, 1, stale)

	// A 5 s long freeze at t0 with a 10 s quiet before it (lease 8 s + reap
	// 1 s + 1 s): mysql leased 2 before (0.2/s) and 3 during (0.6/s),
	// python none before and 1 during.
	r := &chaosRun{cfg: chaosConfig{poolList: []string{"mysql", "python"}, lease: 8 * time.Second, reap: time.Second},
		f: &fleet{db: db}}
	lines, err := r.freezeLeaseRates(t.Context(), []freezeWindow{{start: t0, end: t0.Add(5 * time.Second), long: true},
		{start: t0.Add(-time.Hour), end: t0.Add(-time.Hour + time.Second)}}) // a short freeze: not counted
	require.NoError(t, err)
	require.Equal(t, "freeze_leased_per_s_before=0.20 freeze_leased_per_s_during=0.80 freeze_leased_ratio=4.00\n"+
		"freeze_leased_per_s_before_mysql=0.20 freeze_leased_per_s_during_mysql=0.60 freeze_leased_ratio_mysql=3.00\n"+
		"freeze_leased_per_s_before_python=0.00 freeze_leased_per_s_during_python=0.20 freeze_leased_ratio_python=NaN\n", lines)
	none, err := r.freezeLeaseRates(t.Context(), []freezeWindow{{start: t0, end: t0.Add(5 * time.Second)}})
	require.NoError(t, err)
	require.Empty(t, none, "no long freeze, no lines")
}
