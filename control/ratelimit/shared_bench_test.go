package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/ratelimit"
	"github.com/kece-oj/kece/control/store"
)

// sharedTake is a token bucket kept in one database row, the way replicas
// would share one budget: a single autocommitted UPDATE refills the bucket
// by the time since its last request, takes one request when there is one,
// and says so by the rows it changed. (MySQL and MariaDB assign left to
// right, so tokens is computed from the old at.)
const sharedTake = `UPDATE bench_rate_bucket
	SET tokens = LEAST(?, tokens + TIMESTAMPDIFF(MICROSECOND, at, NOW(6)) / 1e6 * ?) - 1, at = NOW(6)
	WHERE token_id = ? AND LEAST(?, tokens + TIMESTAMPDIFF(MICROSECOND, at, NOW(6)) / 1e6 * ?) >= 1`

// BenchmarkSharedBucket measures what sharing one budget across replicas
// through the database would cost each business request, against the
// in-memory bucket each replica keeps (control/ratelimit) and against the
// token lookup every business request already makes (the baseline a
// shared bucket would add to). It prints key=value lines: per-request
// latency (p50, p99) sequentially, and throughput with 8 clients on one
// token (one hot row, as one busy backend behind N replicas would be) and
// on 8 tokens. The budget is so large that every request is admitted: this
// is the cost of asking, not of refusing.
//
//	KECE_REQUIRE_MYSQL=1 go test ./control/ratelimit -run '^$' -bench SharedBucket -benchtime 1x
func BenchmarkSharedBucket(b *testing.B) {
	db, _ := dbtest.Open(b)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE bench_rate_bucket (token_id BIGINT NOT NULL PRIMARY KEY,
		tokens DOUBLE NOT NULL, at DATETIME(6) NOT NULL) ENGINE=InnoDB`); err != nil {
		b.Fatal(err)
	}
	const big = 1e12
	for id := range 8 {
		if _, err := db.ExecContext(ctx, `INSERT INTO bench_rate_bucket VALUES (?, ?, NOW(6))`, id, big); err != nil {
			b.Fatal(err)
		}
	}
	st, err := store.New(db, store.Config{})
	if err != nil {
		b.Fatal(err)
	}
	secret, err := st.CreateToken(ctx, store.TokenBusiness, "bench")
	if err != nil {
		b.Fatal(err)
	}
	mem, err := ratelimit.New(ratelimit.Config{Default: ratelimit.Limit{Rate: ratelimit.RateMax, Burst: ratelimit.BurstMax}})
	if err != nil {
		b.Fatal(err)
	}
	shared := func(token int64) error {
		r, err := db.ExecContext(ctx, sharedTake, big, big, token, big, big)
		if err != nil {
			return err
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("shared bucket refused a request it had budget for")
		}
		return nil
	}
	lookup := func(int64) error { _, err := st.AuthenticateToken(ctx, store.TokenBusiness, secret); return err }
	inMemory := func(token int64) error {
		if ok, _ := mem.Allow(token, nil); !ok {
			return fmt.Errorf("in-memory bucket refused a request it had budget for")
		}
		return nil
	}
	for range b.N {
		const seq = 2000
		for _, m := range []struct {
			name string
			fn   func(int64) error
			n    int
		}{{"in_memory", inMemory, 200_000}, {"baseline_token_lookup", lookup, seq}, {"shared_db_update", shared, seq}} {
			p50, p99 := latencies(b, m.n, m.fn)
			fmt.Printf("rate_limit_sequential mode=%s requests=%d p50_us=%.2f p99_us=%.2f\n", m.name, m.n, us(p50), us(p99))
		}
		for _, tokens := range []int{1, 8} {
			for _, m := range []struct {
				name string
				fn   func(int64) error
				n    int
			}{{"in_memory", inMemory, 200_000}, {"shared_db_update", shared, seq}} {
				rps := throughput(b, 8, tokens, m.n, m.fn)
				fmt.Printf("rate_limit_concurrent mode=%s clients=8 tokens=%d requests=%d per_second=%.0f\n", m.name, tokens, m.n, rps)
			}
		}
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// latencies times n sequential calls on token 0: median and 99th percentile.
func latencies(b *testing.B, n int, fn func(int64) error) (p50, p99 time.Duration) {
	b.Helper()
	d := make([]time.Duration, n)
	for i := range d {
		start := time.Now()
		if err := fn(0); err != nil {
			b.Fatal(err)
		}
		d[i] = time.Since(start)
	}
	slices.Sort(d)
	return d[n/2], d[n*99/100]
}

// throughput runs n calls from clients goroutines spread over tokens and
// answers the calls per second.
func throughput(b *testing.B, clients, tokens, n int, fn func(int64) error) float64 {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for range n / clients {
				if err := fn(int64(c % tokens)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(n/clients*clients) / elapsed.Seconds()
}
