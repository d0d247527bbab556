package store

import (
	"context"
	"fmt"

	"github.com/kece-oj/kece/control/longpoll"
)

// PoolSignals returns each pool's wake-up counters (one cheap query): the
// sum of the pool's signal rows (moved by work made ready again: requeue,
// rejudge, enqueue on the locking path) and its highest job id (moved by a
// new job; enqueue writes no signal row). Both only grow.
func (s *Store) PoolSignals(ctx context.Context) (map[string]longpoll.Signal, error) {
	rows, err := s.db.Pool.QueryContext(ctx,
		`SELECT pool, SUM(bumps), SUM(newest) FROM (
		   SELECT pool, SUM(seq) AS bumps, 0 AS newest FROM judge_pool_signal GROUP BY pool
		   UNION ALL SELECT pool, 0, MAX(id) FROM judge_job GROUP BY pool) x
		 GROUP BY pool`)
	if err != nil {
		return nil, fmt.Errorf("store: pool signals: %w", err)
	}
	defer rows.Close()
	out := make(map[string]longpoll.Signal, 5)
	for rows.Next() {
		var p string
		var sig longpoll.Signal
		if err := rows.Scan(&p, &sig.Bumps, &sig.NewestJob); err != nil {
			return nil, fmt.Errorf("store: pool signals: %w", err)
		}
		out[p] = sig
	}
	return out, rows.Err()
}
