package store

import (
	"context"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/kece-oj/kece/control/manifest"
)

// WithObserver returns a copy of s that reports to o.
func (s *Store) WithObserver(o Observer) *Store {
	return s.with(func(c *jobdb.Core) { c.Obs = o })
}

func (s *core) observeEnqueueMany(ctx context.Context, reqs []EnqueueRequest, out []EnqueueResult, err error) {
	if jobdb.IsDBError(err) {
		s.db.Observer().DBError(ctx, "enqueue")
	}
	if err != nil {
		return
	}
	pools := map[string]int{}
	for i, r := range out {
		if r.Created {
			pool, _ := manifest.PoolForLanguage(reqs[i].Language)
			pools[pool]++
		}
	}
	for pool, n := range pools {
		s.db.Observer().JobsEnqueued(ctx, pool, "submission", n)
	}
}

func (s *core) observeEnqueue(ctx context.Context, req EnqueueRequest, res EnqueueResult, err error, kind string) {
	if jobdb.IsDBError(err) {
		s.db.Observer().DBError(ctx, "enqueue")
	}
	if err != nil || !res.Created {
		return
	}
	pool, _ := manifest.PoolForLanguage(req.Language)
	s.db.Observer().JobsEnqueued(ctx, pool, kind, 1)
}
