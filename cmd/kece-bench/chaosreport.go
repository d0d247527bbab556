package main

// The chaos run's verdict: the invariants from the client's view and the
// database's, the figures it prints, recovery and reconcile.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kece-oj/kece/control/store"
)

// report checks the invariants and prints the figures; ok says the targets held.
func (r *chaosRun) report(ctx context.Context, wall time.Duration) (bool, error) {
	freezeLines, freezeOK, err := r.freezeFigures(ctx)
	if err != nil {
		return false, err
	}
	db := r.f.db
	inDB, err := chaosJobs(ctx, r.f.db)
	if err != nil {
		return false, err
	}
	multiCommit, err := jobsCommittedTwice(ctx, db)
	if err != nil {
		return false, err
	}
	attempts, expired := attemptTotals(ctx, db)
	violations, err := r.reconcile(ctx)
	if err != nil {
		return false, err
	}
	recovery, err := r.recovery(ctx)
	if err != nil {
		return false, err
	}
	stale, err := staleClaimLeases(ctx, db)
	if err != nil {
		return false, err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tally(inDB)
	jobs, notAccepted, finished, lost, duplicated := t.jobs, t.notAccepted, t.finished, t.lost, t.duplicated
	stuck, wrong, systemErrors, redelivered := t.stuck, t.wrong, t.systemErrors, t.redelivered
	duplicated += multiCommit

	mode := "private_mariadb"
	if r.galera != nil {
		mode = "galera_" + r.cfg.writers + "_writer"
	}
	fmt.Printf("mode=%s seed=%d pools=%s nodes=%d slots=%d replicas=2 lease_ms=%d reap_ms=%d node_url_list=%t\n", mode, r.cfg.seed,
		strings.Join(r.cfg.poolList, ","), len(r.nodes), r.cfg.slots, r.cfg.lease.Milliseconds(), r.cfg.reap.Milliseconds(), r.urlList)
	fmt.Printf("wall_s=%.0f max_rate_per_s=%g in_flight_per_pool=%d\n", wall.Seconds(), r.cfg.rate, r.cfg.inFlight)
	total := 0
	var kinds []string
	for k := range r.faultCount {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		fmt.Printf("faults_%s=%d\n", k, r.faultCount[k])
		total += r.faultCount[k]
	}
	fmt.Printf("faults=%d\n", total)
	var retries float64
	for _, rep := range r.replicas {
		rep.mu.Lock()
		retries += rep.retryBase + rep.retryLast
		rep.mu.Unlock()
	}
	if r.galera != nil {
		for i, p := range r.dbProxies[:2] {
			fmt.Printf("replica_%c_db_node=%s\n", 'a'+i, p.current())
		}
	}
	fmt.Printf("jobs=%d\n", jobs)
	fmt.Printf("not_accepted=%d\n", notAccepted)
	fmt.Printf("enqueue_retries=%d\n", r.enqueueErrors)
	fmt.Printf("finished=%d\n", finished)
	fmt.Printf("system_errors=%d\n", systemErrors)
	fmt.Printf("attempts=%d expired_attempts=%d\n", attempts, expired)
	fmt.Printf("lost=%d\n", lost)
	fmt.Printf("duplicated=%d\n", duplicated)
	fmt.Printf("stuck=%d\n", stuck)
	fmt.Printf("wrong=%d\n", wrong)
	fmt.Printf("redelivered_events=%d\n", redelivered)
	fmt.Printf("deadlock_retries=%.0f\n", retries)
	fmt.Printf("reconcile_violations=%d\n", violations)
	fmt.Printf("node_exits_unplanned=%d\n", r.unplannedExits)
	if recovery >= 0 {
		fmt.Printf("recovery_s=%.1f\n", recovery)
	} else {
		fmt.Printf("recovery_s=NaN\n")
	}
	if r.galeraRejoin != "" {
		fmt.Println(r.galeraRejoin)
	}
	fmt.Print(freezeLines)
	fmt.Printf("stale_claim_leases=%d late_answers=%d\n", stale, r.lateAnswers())
	return lost == 0 && duplicated == 0 && stuck == 0 && wrong == 0 && violations == 0 && recovery >= 0 && freezeOK && stale == 0, nil
}

// recovery is how long after the last fault ended judging worked again in
// every pool: until the first attempt that started after that moment
// committed its result (max over pools), from the database's attempt rows;
// -1 if a pool has none. Queued work from before does not count, so a
// backlog does not hide or inflate it.
func (r *chaosRun) recovery(ctx context.Context) (float64, error) {
	first, err := firstCompletionPerPool(ctx, r.f.db, r.lastFaultEnd)
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for _, p := range r.cfg.poolList {
		t, ok := first[p]
		if !ok {
			return -1, nil
		}
		worst = max(worst, t.Sub(r.lastFaultEnd).Seconds())
	}
	return worst, nil
}

// reconcile runs `kece-control reconcile` on the run's database, as the
// operator on call would, and counts its violations.
func (r *chaosRun) reconcile(ctx context.Context) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(r.f.bin, "kece-control"), "reconcile", "--mysql-dsn", r.f.dsn,
		"--reap-interval", r.cfg.reap.String(), "-o", "json")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) {
		return 0, fmt.Errorf("kece-control reconcile: %w\n%s", err, out)
	}
	var rep struct {
		Violations []json.RawMessage `json:"violations"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return 0, fmt.Errorf("kece-control reconcile output: %w", err)
	}
	for _, v := range rep.Violations {
		fmt.Fprintf(os.Stderr, "chaos: reconcile violation %s\n", v)
	}
	return len(rep.Violations), nil
}

// chaosRow is a submission's jobs as the database has them.
type chaosRow struct {
	state, verdict string
	jobs           int
}

// chaosTally is the client's view of the submissions against the
// database's.
type chaosTally struct {
	jobs, notAccepted, finished, lost, duplicated, stuck, wrong, systemErrors, redelivered int
}

// tally compares each submission the client made with its jobs in the
// database, naming every loss, stuck job and wrong verdict on stderr (r.mu
// held).
func (r *chaosRun) tally(inDB map[string]chaosRow) chaosTally {
	var t chaosTally
	for _, s := range r.order {
		d, ok := inDB[s.id]
		if !s.accepted && !ok {
			t.notAccepted++
			continue
		}
		t.jobs++
		switch {
		case !ok:
			t.lost++ // accepted, yet the database has no job
			fmt.Fprintf(os.Stderr, "chaos: lost %s (%s): accepted, no job in the database\n", s.id, s.pool)
			continue
		case d.jobs > 1 || len(s.events) > 1:
			t.duplicated++
		}
		for _, n := range s.events {
			t.redelivered += n - 1
		}
		terminal := d.state == string(store.StateCompleted) || d.state == string(store.StateFailed)
		switch {
		case !terminal:
			t.stuck++
			fmt.Fprintf(os.Stderr, "chaos: stuck %s (%s): job state %s\n", s.id, s.pool, d.state)
		case s.settledAt.IsZero():
			t.lost++ // settled in the database, never delivered to the business
			fmt.Fprintf(os.Stderr, "chaos: lost %s (%s): job %s %s, no settlement event received\n", s.id, s.pool, d.state, d.verdict)
		default:
			t.finished++
			if d.state == string(store.StateFailed) || s.status == "SYSTEM_ERROR" {
				t.systemErrors++
			} else if d.verdict != s.want || s.status != s.want {
				t.wrong++
				fmt.Fprintf(os.Stderr, "chaos: wrong verdict %s (%s): want %s, job %s %s, business saw %s\n", s.id, s.pool, s.want, d.state, d.verdict, s.status)
			}
		}
	}
	return t
}
