package lease

// HoldWrites makes e queue every renewal and result until release, which
// runs what queued as one batch; queued reports how many calls wait. Tests
// use it (through store's test exports) to build a batch for certain;
// production code never calls it.
func HoldWrites(e *Engine) (queued func() int, release func()) {
	e.writer.Hold()
	return e.writer.Queued, e.writer.Release
}

// HoldClaims is HoldWrites for the claims of pool.
func HoldClaims(e *Engine, pool string) (queued func() int, release func()) {
	b := e.claimers.of(pool)
	b.Hold()
	return b.Queued, b.Release
}
