package lease

import (
	"database/sql"
	"testing"

	"github.com/kece-oj/kece/control/internal/jobdb"
	"github.com/stretchr/testify/require"
)

// The fencing decision of a result, case by case (DESIGN §5).
func TestFenceResult(t *testing.T) {
	t.Parallel()
	sess := jobdb.NodeSession{NodeID: 7, SessionEpoch: 3}
	// live: a result for the live lease of the current job; each case changes
	// what it names.
	live := func() fenceFacts {
		return fenceFacts{jobID: 10, leaseEpoch: 2, sess: sess, digest: "d1",
			attemptGranted: true, attemptNode: 7, nodeEpoch: 3, current: 10,
			state: jobdb.StateRunning, jobLeaseEpoch: 2, jobNode: sql.NullInt64{Int64: 7, Valid: true},
			jobSession: sql.NullInt64{Int64: 3, Valid: true}, live: true}
	}
	for _, tc := range []struct {
		name      string
		change    func(*fenceFacts)
		committed bool
		want      error // nil: accepted (or already committed)
	}{
		{"live lease is accepted", func(*fenceFacts) {}, false, nil},
		{"lease never granted", func(f *fenceFacts) { f.attemptGranted = false }, false, jobdb.ErrLeaseLost},
		{"lease of another node", func(f *fenceFacts) { f.attemptNode = 8 }, false, jobdb.ErrLeaseLost},
		{"same receipt again", func(f *fenceFacts) { f.hasReceipt, f.receipt = true, "d1" }, true, nil},
		{"same receipt even after expiry and revoke", func(f *fenceFacts) {
			f.hasReceipt, f.receipt, f.live, f.nodeRevoked, f.state = true, "d1", false, true, jobdb.StateCompleted
		}, true, nil},
		{"different receipt", func(f *fenceFacts) { f.hasReceipt, f.receipt = true, "d2" }, false, jobdb.ErrResultConflict},
		{"node revoked", func(f *fenceFacts) { f.nodeRevoked = true }, false, jobdb.ErrNodeRevoked},
		{"newer boot", func(f *fenceFacts) { f.nodeEpoch = 4 }, false, jobdb.ErrSessionSuperseded},
		{"cancelled under this lease", func(f *fenceFacts) { f.state = jobdb.StateCancelled }, false, jobdb.ErrJobCancelled},
		{"cancelled by a rejudge", func(f *fenceFacts) { f.state, f.current = jobdb.StateCancelled, 11 }, false, jobdb.ErrSuperseded},
		{"rejudged while running", func(f *fenceFacts) { f.current = 11 }, false, jobdb.ErrSuperseded},
		{"expired, not yet reaped", func(f *fenceFacts) { f.live = false }, false, jobdb.ErrLeaseLost},
		{"reaped and re-leased", func(f *fenceFacts) { f.jobLeaseEpoch = 3 }, false, jobdb.ErrLeaseLost},
		{"requeued", func(f *fenceFacts) { f.state, f.jobNode = jobdb.StateQueued, sql.NullInt64{} }, false, jobdb.ErrLeaseLost},
		{"job owned by an older session", func(f *fenceFacts) { f.jobSession.Int64 = 2 }, false, jobdb.ErrLeaseLost},
		{"job finished otherwise", func(f *fenceFacts) { f.state = jobdb.StateFailed }, false, jobdb.ErrLeaseLost},
	} {
		f := live()
		tc.change(&f)
		committed, err := fenceResult(f)
		require.Equal(t, tc.committed, committed, tc.name)
		if tc.want == nil {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, tc.want, tc.name)
	}
}
