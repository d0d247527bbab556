package main

// Long replica freezes (issue 29): the replica most nodes use is stopped
// (SIGSTOP) for longer than any call's deadline while a backlog waits —
// if it can be caught holding a locking transaction, in the middle of it —
// and the run measures what that cost the fleet: the longest claim stall of
// a pool, counted attempts whose lease ended in a freeze, leases nodes let
// expire unstarted. It also samples what a healthy replica's database
// sessions need (transaction idle gaps, statement times, lock waits), the
// figures the serving replica's session bounds are chosen from.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/kece-oj/kece/telemetry"
	"github.com/kece-oj/kece/worker/faultproxy"
)

// faultReplicaLongFreeze is scheduled (not drawn): -long-freezes times per run.
const faultReplicaLongFreeze = "replica_long_freeze"

// freezeWindow is one replica freeze and what the fleet did meanwhile.
type freezeWindow struct {
	replica    string
	start, end time.Time
	long       bool
	locks      bool // stopped while the database showed it in a locking transaction
	standIn    bool // a stand-in session held a claim's locks instead (standInLocks)
	backlog    int  // jobs ready and queued when it began
	stall      float64
	cut        int // answers the other (healthy) replica's proxy cut meanwhile
}

// freezeStats are the run's freeze figures (r.mu).
type freezeStats struct {
	windows []freezeWindow
	// healthy database session figures, sampled while no fault ran.
	idleTxMaxMs, stmtMaxMs, lockWaitMaxMs float64
	faultActive                           bool
}

// longFreezeAt are the times (from the run's start) of the scheduled long
// freezes: spread evenly over the fault phase.
func (c chaosConfig) longFreezeAt() []time.Duration {
	var out []time.Duration
	phase := c.duration - c.warmup
	for k := range c.longFreezes {
		out = append(out, c.warmup+phase*time.Duration(2*k+1)/time.Duration(2*c.longFreezes))
	}
	return out
}

// busiestReplica is the replica most nodes use now (their
// kece_node_control_replica gauge); the first on a tie or when no node
// answers.
func (r *chaosRun) busiestReplica(ctx context.Context) *chaosReplica {
	counts := make([]float64, len(r.replicas))
	for _, n := range r.nodes {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		s, err := telemetry.Scrape(cctx, n.metrics)
		cancel()
		if err != nil {
			continue
		}
		for i, rep := range r.replicas {
			counts[i] += s.Sum("kece_node_control_replica", "url", rep.proxy.URL())
		}
	}
	best := 0
	for i := range counts {
		if counts[i] > counts[best] {
			best = i
		}
	}
	return r.replicas[best]
}

// lockingTx counts the open transactions holding locks on the connections
// of process pid (its local ports towards the database at dbPort; the
// server shows the client as host:port, the host name resolved or not).
func lockingTx(ctx context.Context, db *sql.DB, ports []int) int {
	if len(ports) == 0 {
		return 0
	}
	hosts := make([]any, len(ports))
	for i, p := range ports {
		hosts[i] = strconv.Itoa(p)
	}
	var n int
	_ = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX t
		JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		WHERE t.trx_lock_structs > 0 AND SUBSTRING_INDEX(p.HOST, ':', -1) IN (?`+strings.Repeat(", ?", len(hosts)-1)+`)`, hosts...).Scan(&n)
	return n
}

// dbClientPorts lists the local ports of process pid's TCP connections to
// dbPort on loopback, from /proc (Linux).
func dbClientPorts(pid, dbPort int) []int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil {
			if in, ok := strings.CutPrefix(l, "socket:["); ok {
				inodes[strings.TrimSuffix(in, "]")] = true
			}
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil
	}
	var ports []int
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		_, lport, _ := strings.Cut(f[1], ":")
		_, rport, _ := strings.Cut(f[2], ":")
		l, err1 := strconv.ParseInt(lport, 16, 32)
		r, err2 := strconv.ParseInt(rport, 16, 32)
		if err1 == nil && err2 == nil && int(r) == dbPort {
			ports = append(ports, int(l))
		}
	}
	return ports
}

// burst enqueues, past the closed loop's cap, four times a pool's slots of
// submissions per pool (the SQL ones sleep): the backlog a long freeze
// meets. It returns
// once they are all accepted (or gave up), so they are queued.
func (r *chaosRun) burst(ctx context.Context) {
	var wg sync.WaitGroup
	r.mu.Lock()
	r.bursts++
	b := r.bursts
	r.mu.Unlock()
	for _, pool := range r.cfg.poolList {
		for i := range 4 * r.cfg.nodesPerPool * r.cfg.slots {
			wg.Go(func() { r.submitOne(ctx, fmt.Sprintf("chaos-%d-burst%d-%s-%d", r.cfg.seed, b, pool, i), pool, 2) })
		}
	}
	wg.Wait()
}

// longFreeze stops the busiest replica for -long-freeze, inside a locking
// transaction if it can (see below), else at once.
func (r *chaosRun) longFreeze(ctx context.Context) error {
	r.burst(ctx)
	rep := r.busiestReplica(ctx)
	p := rep.proc.cmd.Process
	locks := false
	// For up to 3 s (the backlog is still there), watch the database for a
	// transaction of the replica that holds locks; stop the replica the
	// moment one shows, and keep it stopped if the transaction is still
	// open then (it stays open: the replica can no longer end it).
	var ports []int
	for end, refresh := time.Now().Add(3*time.Second), (time.Time{}); r.controlDB != nil && !locks && time.Now().Before(end) && ctx.Err() == nil; {
		if time.Now().After(refresh) {
			ports, refresh = dbClientPorts(p.Pid, r.controlDB.port), time.Now().Add(100*time.Millisecond)
		}
		if lockingTx(ctx, r.f.db, ports) == 0 {
			continue
		}
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		if locks = lockingTx(ctx, r.f.db, ports) > 0; !locks {
			if err := p.Signal(syscall.SIGCONT); err != nil {
				return err
			}
		}
	}
	w := freezeWindow{replica: rep.name, long: true, locks: locks, backlog: readyBacklog(ctx, r.f.db)}
	if !w.locks {
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		// The replica's transactions are mostly one round trip each (store
		// scripts), so it is rarely caught inside one: a stand-in session
		// with a serving replica's bounds takes the locks a claim takes
		// (every host group and node row) and goes idle, as the frozen
		// replica would have.
		release, err := r.standInLocks(ctx)
		if err != nil {
			return err
		}
		defer release()
		w.standIn = true
	}
	return r.frozen(ctx, rep, w, r.cfg.longFreeze)
}

// standInLocks opens a transaction with a serving replica's session bounds
// (kece-control serve: idle_transaction_timeout=2, innodb_lock_wait_timeout=2)
// that locks every host group and node row, and leaves it idle: the server
// ends it after its idle bound. release closes its connection. Its lock
// wait is a serving replica's too, so a busy fleet can make it time out
// (1205): it tries again, as the store retries its own transactions.
func (r *chaosRun) standInLocks(ctx context.Context) (func(), error) {
	var err error
	for range 5 {
		var release func()
		if release, err = r.tryStandInLocks(ctx); err == nil || !lockWaitTimeout(err) {
			return release, err
		}
	}
	return nil, err
}

// lockWaitTimeout says whether err is MySQL's lock wait timeout (1205).
func lockWaitTimeout(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}

func (r *chaosRun) tryStandInLocks(ctx context.Context) (func(), error) {
	conn, err := r.f.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	release := func() { _ = conn.Raw(func(any) error { return driver.ErrBadConn }); conn.Close() }
	for _, q := range []string{`SET SESSION idle_transaction_timeout = 2, innodb_lock_wait_timeout = 2`, `BEGIN`, lockEveryGroupAndNode} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			release()
			return nil, fmt.Errorf("stand-in locks: %w", err)
		}
	}
	return release, nil
}

// frozen keeps rep stopped for d (it is stopped already) while the other
// replica's proxy cuts every tenth answer (freezeCutEvery) — a node must
// not go back to the frozen replica for that (issue 47, item 2) —,
// sampling the pools' claim stall from the freeze's start until a little
// after its end, and records the window.
func (r *chaosRun) frozen(ctx context.Context, rep *chaosReplica, w freezeWindow, d time.Duration) error {
	w.start = time.Now()
	var cuts []*faultproxy.Handle
	for _, o := range r.others(rep) {
		cuts = append(cuts, o.proxy.Add(faultproxy.Rule{Method: "POST", Action: faultproxy.DropResponse, Every: freezeCutEvery}))
	}
	sctx, stop := context.WithCancel(ctx)
	stalls := make(chan float64, 1)
	go func() { stalls <- r.sampleStall(sctx) }()
	sleepCtx(ctx, d)
	err := rep.proc.cmd.Process.Signal(syscall.SIGCONT)
	w.end = time.Now()
	for i, o := range r.others(rep) {
		o.proxy.Remove(cuts[i])
		w.cut += cuts[i].Hits()
	}
	sleepCtx(ctx, 3*time.Second) // the fleet's recovery counts too
	stop()
	w.stall = <-stalls
	r.mu.Lock()
	r.freeze.windows = append(r.freeze.windows, w)
	r.mu.Unlock()
	return err
}

// freezeCutEvery: during a freeze the healthy replica's proxy cuts every
// freezeCutEvery-th answer to a node's call (10 %, the repro).
const freezeCutEvery = 10

// others are the replicas but rep, in their order.
func (r *chaosRun) others(rep *chaosReplica) []*chaosReplica {
	var out []*chaosReplica
	for _, o := range r.replicas {
		if o != rep {
			out = append(out, o)
		}
	}
	return out
}

// sampleStall samples every 100 ms, per pool, how long no job was leased
// while jobs were queued and ready and a node of the pool had a slot free
// to lease (freeSlots), and returns the longest, in seconds.
func (r *chaosRun) sampleStall(ctx context.Context) float64 {
	queuedSince := map[string]time.Time{}
	worst := 0.0
	for ctx.Err() == nil {
		now := time.Now()
		free := r.freeSlots(ctx)
		for _, pool := range r.cfg.poolList {
			queued, sinceGrant, err := poolClaimSample(ctx, r.f.db, pool)
			if err != nil {
				continue
			}
			// A pool whose every slot is in its executor cannot lease:
			// that is a full pool (its jobs' run time), not a stall.
			if queued == 0 || free[pool] <= 0 {
				delete(queuedSince, pool)
				continue
			}
			if _, ok := queuedSince[pool]; !ok {
				queuedSince[pool] = now
			}
			stall := now.Sub(queuedSince[pool]).Seconds()
			if sinceGrant.Valid {
				stall = min(stall, sinceGrant.Float64)
			}
			worst = max(worst, stall)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return worst
}

// freeSlots is, per pool, the slots its nodes could lease into now, from
// each node's own gauges: its slots less the jobs in its executor, none
// while it is paused on a dependency or draining or does not answer. A
// slot whose job is downloading inputs or posting its result counts as
// free: a replica that hangs holding those calls is what a stall measures.
func (r *chaosRun) freeSlots(ctx context.Context) map[string]float64 {
	free := map[string]float64{}
	for _, n := range r.nodes {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		s, err := telemetry.Scrape(cctx, n.metrics)
		cancel()
		if err != nil || s.Sum("kece_node_dependency_paused") > 0 || s.Sum("kece_node_draining") > 0 {
			continue
		}
		free[n.pool] += s.Sum("kece_node_slots") - s.Sum("kece_node_slots_executing")
	}
	return free
}

// sampleSessions records, while no fault runs, the longest idle gap inside
// a transaction, statement and lock wait the database shows for the
// replicas' sessions (MariaDB's PROCESSLIST.TIME_MS; the private server
// only).
func (r *chaosRun) sampleSessions(ctx context.Context) {
	if r.controlDB == nil {
		return
	}
	for ctx.Err() == nil {
		sleepCtx(ctx, 200*time.Millisecond)
		r.mu.Lock()
		active := r.freeze.faultActive
		r.mu.Unlock()
		if active {
			continue
		}
		var idle, stmt, wait sql.NullFloat64
		err := r.f.db.QueryRowContext(ctx, `SELECT
			MAX(IF(p.COMMAND = 'Sleep', p.TIME_MS, NULL)),
			MAX(IF(p.COMMAND = 'Query' AND t.trx_state <> 'LOCK WAIT', p.TIME_MS, NULL)),
			MAX(IF(t.trx_state = 'LOCK WAIT', p.TIME_MS, NULL))
			FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE p.ID <> CONNECTION_ID()`).Scan(&idle, &stmt, &wait)
		r.mu.Lock()
		if err == nil && !r.freeze.faultActive {
			r.freeze.idleTxMaxMs = max(r.freeze.idleTxMaxMs, idle.Float64)
			r.freeze.stmtMaxMs = max(r.freeze.stmtMaxMs, stmt.Float64)
			r.freeze.lockWaitMaxMs = max(r.freeze.lockWaitMaxMs, wait.Float64)
		}
		r.mu.Unlock()
	}
}

// freezeFigures computes and prints the freeze figures; ok says their
// targets held: with one replica frozen, however long, and the other
// healthy, no pool stalls more than 3 s, no counted attempt's lease ends in
// the freeze, and no node lets a fresh lease expire.
func (r *chaosRun) freezeFigures(ctx context.Context) (string, bool, error) {
	r.mu.Lock()
	windows := append([]freezeWindow(nil), r.freeze.windows...)
	fs := r.freeze
	r.mu.Unlock()
	var freezeMax, stallMax float64
	spent, long, locks, standIns, backlogMin, cut := 0, 0, 0, 0, -1, 0
	for _, w := range windows {
		cut += w.cut
		freezeMax = max(freezeMax, w.end.Sub(w.start).Seconds())
		stallMax = max(stallMax, w.stall)
		if w.long {
			long++
			if backlogMin < 0 || w.backlog < backlogMin {
				backlogMin = w.backlog
			}
		}
		if w.locks {
			locks++
		}
		if w.standIn {
			standIns++
		}
		// A lease that the freeze ended ends at most a lease TTL (and a
		// reap) after it; no other fault runs meanwhile (freezeQuiet).
		n, err := startedAttemptsExpiredBetween(ctx, r.f.db, w.start, w.end.Add(r.freezeQuiet()))
		if err != nil {
			return "", false, err
		}
		spent += n
	}
	dropped, err := r.droppedFresh()
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "replica_freezes=%d replica_long_freezes=%d freezes_holding_locks=%d lock_stand_ins=%d long_freeze_backlog_min=%d\n",
		len(windows), long, locks, standIns, backlogMin)
	fmt.Fprintf(&b, "replica_freeze_max_s=%.1f freeze_cut_answers=%d\n", freezeMax, cut)
	rates, err := r.freezeLeaseRates(ctx, windows)
	if err != nil {
		return "", false, err
	}
	b.WriteString(rates)
	fmt.Fprintf(&b, "fleet_claim_stall_max_s=%.1f\n", stallMax)
	fmt.Fprintf(&b, "attempts_spent_in_freezes=%d\n", spent)
	fmt.Fprintf(&b, "leases_dropped_fresh=%d\n", dropped)
	if r.controlDB != nil {
		fmt.Fprintf(&b, "db_healthy_idle_in_tx_max_ms=%.0f db_healthy_statement_max_ms=%.0f db_healthy_lock_wait_max_ms=%.0f\n",
			fs.idleTxMaxMs, fs.stmtMaxMs, fs.lockWaitMaxMs)
	}
	return b.String(), stallMax <= 3 && spent == 0 && dropped == 0, nil
}

// freezeQuiet is how long after a freeze no other fault starts: a lease
// the freeze cost ends within it, so it is counted against the freeze.
func (r *chaosRun) freezeQuiet() time.Duration { return r.cfg.lease + r.cfg.reap + time.Second }

// droppedFresh counts, in every node process's log, the leases it let
// expire unstarted because they arrived past their local deadline.
func (r *chaosRun) droppedFresh() (int, error) {
	logs, err := filepath.Glob(filepath.Join(r.f.work, "node-*.log"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return 0, err
		}
		n += strings.Count(string(b), "lease already past the local deadline; left to expire")
	}
	return n, nil
}

// faulting runs one fault with the fault-active flag set (the healthy
// session sampler skips that time).
func (r *chaosRun) faulting(f func() error) error {
	r.mu.Lock()
	r.freeze.faultActive = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.freeze.faultActive = false
		r.mu.Unlock()
	}()
	return f()
}
