package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/kece-oj/kece/control/longpoll"
)

// PoolSignalSlots is how many rows each pool's wake-up counter is spread over.
const PoolSignalSlots = 16

// bumpPool marks the pool as having work ready again (a requeue, a rejudge,
// an enqueue on the locking path), inside the transaction that made it ready
// and as its last statement: the signal commits exactly when the work does
// (EnqueueTx included). Waiters in every replica see it at their next poll of
// PoolSignals. A fresh enqueue needs no bump: the pool's highest job id moves.
func bumpPool(ctx context.Context, tx *sql.Tx, pool string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_pool_signal SET seq = seq + 1 WHERE pool = ? AND slot = ?`, pool, rand.IntN(PoolSignalSlots)); err != nil {
		return fmt.Errorf("store: pool signal: %w", err)
	}
	return nil
}

// bumpPools bumps each pool once, in name order: the last statements of a
// transaction that made work of these pools ready again.
func bumpPools(ctx context.Context, tx *sql.Tx, pools map[string]bool) error {
	for _, p := range slices.Sorted(maps.Keys(pools)) {
		if err := bumpPool(ctx, tx, p); err != nil {
			return err
		}
	}
	return nil
}

// PoolSignals returns each pool's wake-up counters (one cheap query): the
// sum of the pool's signal rows (moved by work made ready again: requeue,
// rejudge, enqueue on the locking path) and its highest job id (moved by a
// new job; enqueue writes no signal row). Both only grow.
func (s *Store) PoolSignals(ctx context.Context) (map[string]longpoll.Signal, error) {
	rows, err := s.db.QueryContext(ctx,
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
