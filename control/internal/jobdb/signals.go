package jobdb

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
)

// PoolSignalSlots is how many rows each pool's wake-up counter is spread over.
const PoolSignalSlots = 16

// BumpPool marks the pool as having work ready again (a requeue, a rejudge,
// an enqueue on the locking path), inside the transaction that made it ready
// and as its last statement: the signal commits exactly when the work does
// (EnqueueTx included). Waiters in every replica see it at their next poll of
// PoolSignals. A fresh enqueue needs no bump: the pool's highest job id moves.
func BumpPool(ctx context.Context, tx *sql.Tx, pool string) error {
	if _, err := tx.ExecContext(ctx,
		`UPDATE judge_pool_signal SET seq = seq + 1 WHERE pool = ? AND slot = ?`, pool, rand.IntN(PoolSignalSlots)); err != nil {
		return fmt.Errorf("store: pool signal: %w", err)
	}
	return nil
}

// BumpPools bumps each pool once, in name order: the last statements of a
// transaction that made work of these pools ready again.
func BumpPools(ctx context.Context, tx *sql.Tx, pools map[string]bool) error {
	for _, p := range slices.Sorted(maps.Keys(pools)) {
		if err := BumpPool(ctx, tx, p); err != nil {
			return err
		}
	}
	return nil
}
