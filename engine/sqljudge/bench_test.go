package sqljudge

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kece-oj/kece/engine"
)

// BenchmarkExecute judges a small SELECT problem per iteration (create
// database and account, DDL, seed, reference, student query, compare, drop)
// and prints, in the same run, the baseline of the bare server work every job
// needs at least: CREATE DATABASE, one CREATE TABLE, DROP DATABASE as root.
//
//	go test -run '^$' -bench Execute ./engine/sqljudge/
func BenchmarkExecute(b *testing.B) {
	root := rootDBForBench(b)
	e, err := New(Config{AdminDSN: judgeDSN(), NodeID: "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36), Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	p := selectProblem("SELECT dept, COUNT(*) FROM person GROUP BY dept", false)
	task := func(i int) engine.Task {
		return engine.Task{JobID: "bench-" + strconv.Itoa(i), LeaseEpoch: 1, SQL: p,
			Source: []byte("SELECT dept, COUNT(*) FROM person GROUP BY dept")}
	}
	if _, err := e.SelfCheck(ctx); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		v, err := e.Execute(ctx, task(i), engine.NoProgress)
		if err != nil || v.Status != engine.StatusAccepted {
			b.Fatalf("job %d: %v %v %s", i, err, v.Status, v.Message)
		}
	}
	perJob := time.Since(start) / time.Duration(b.N)
	b.StopTimer()

	// Four jobs at a time, as a node with four slots runs them.
	const slots, parallelJobs = 4, 40
	start = time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, slots)
	for i := 0; i < parallelJobs; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			v, err := e.Execute(ctx, task(b.N+i), engine.NoProgress)
			if err != nil || v.Status != engine.StatusAccepted {
				b.Errorf("parallel job %d: %v %v", i, err, v.Status)
			}
		}()
	}
	wg.Wait()
	throughput := float64(parallelJobs) / time.Since(start).Seconds()

	// Baseline: the bare server work, same count.
	start = time.Now()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("kece_bench_base_%d", i)
		for _, s := range []string{"CREATE DATABASE " + name, "CREATE TABLE " + name + ".t (x INT)", "DROP DATABASE " + name} {
			if _, err := root.ExecContext(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
	}
	base := time.Since(start) / time.Duration(b.N)

	b.ReportMetric(float64(perJob.Microseconds())/1000, "ms/job")
	fmt.Printf("sqljudge_execute_ms_per_job=%.2f baseline_create_table_drop_db_ms=%.2f overhead_ratio=%.1f parallel_slots=%d parallel_jobs_per_s=%.1f n=%d\n",
		float64(perJob.Microseconds())/1000, float64(base.Microseconds())/1000,
		float64(perJob)/float64(base), slots, throughput, b.N)
}
