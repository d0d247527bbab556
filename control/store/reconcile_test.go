package store_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

// busyDatabase builds a healthy history: completed, failed-and-retried,
// rejudged, cancelled and still-running jobs, checks and events.
type busyDatabase struct {
	sess      store.Session
	completed int64 // COMPLETED submission job (has a SETTLED event)
	running   int64 // RUNNING job with a live lease
	oldGen    int64 // generation 1 of a rejudged submission (cancelled)
	newGen    int64 // its generation 2 (queued)
}

func (b *testBundle) busyDatabase(t *testing.T) busyDatabase {
	t.Helper()
	g := b.Group(t, 8)
	sess := b.Node(t, "cpp", g.ID, 4, true)
	var d busyDatabase
	d.sess = sess
	d.completed = b.Enqueue(t, "ALGO", "done").JobID
	c := b.ClaimEventually(t, b.Store, sess.NodeSession)
	require.Equal(t, d.completed, c.JobID)
	_, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, storetest.ACResult())
	require.NoError(t, err)

	retried := b.Enqueue(t, "ALGO", "retried").JobID
	c = b.ClaimEventually(t, b.Store, sess.NodeSession)
	require.Equal(t, retried, c.JobID)
	_, err = b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, storetest.InfraResult())
	require.NoError(t, err)
	c = b.ClaimEventually(t, b.Store, sess.NodeSession)
	require.Equal(t, retried, c.JobID)
	_, err = b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, storetest.WAResult())
	require.NoError(t, err)

	d.oldGen = b.Enqueue(t, "ALGO", "rejudged").JobID
	r, err := b.Store.Jobs().Rejudge(b.Ctx, "ALGO", "rejudged", "test", "new tests")
	require.NoError(t, err)
	d.newGen = r.JobID
	_, err = b.Store.Jobs().Cancel(b.Ctx, "ALGO", "rejudged", "test", "not needed")
	require.NoError(t, err)

	d.running = b.Enqueue(t, "ALGO", "running").JobID
	c = b.ClaimEventually(t, b.Store, sess.NodeSession)
	require.Equal(t, d.running, c.JobID)
	return d
}

func TestReconcileHealthyDatabaseIsOK(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.busyDatabase(t)
	rep, err := b.Store.Reconcile(b.Ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Violations)
	require.True(t, rep.OK())
	require.Contains(t, rep.Rules, store.RuleReaperStuck)
	require.WithinDuration(t, time.Now(), rep.AsOf, time.Minute)
}

func TestReconcileFindsPlantedViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rule    string
		subject func(t *testing.T, d busyDatabase, b *testBundle) int64
		plant   func(t *testing.T, d busyDatabase, b *testBundle)
	}{
		{store.RuleSettlementMissing, func(_ *testing.T, d busyDatabase, _ *testBundle) int64 { return d.completed },
			func(t *testing.T, d busyDatabase, b *testBundle) {
				b.exec(t, `DELETE FROM judge_settlement_event WHERE job_id = ?`, d.completed)
			}},
		{store.RuleRunningWithoutOpenAttempt, func(_ *testing.T, d busyDatabase, _ *testBundle) int64 { return d.running },
			func(t *testing.T, d busyDatabase, b *testBundle) {
				b.exec(t, `UPDATE judge_job_attempt SET outcome = 'EXPIRED', ended_at = NOW(6) WHERE job_id = ?`, d.running)
			}},
		{store.RulePointerNotHighest, func(t *testing.T, _ busyDatabase, b *testBundle) int64 {
			return int64(b.Count(t, `SELECT id FROM judge_submission WHERE submission_id = 'rejudged'`))
		}, func(t *testing.T, d busyDatabase, b *testBundle) {
			b.exec(t, `UPDATE judge_submission SET current_job_id = ?, generation = 1 WHERE submission_id = 'rejudged'`, d.oldGen)
		}},
		{store.RulePointerMissing, func(_ *testing.T, d busyDatabase, _ *testBundle) int64 { return d.newGen },
			func(t *testing.T, _ busyDatabase, b *testBundle) {
				b.exec(t, `DELETE FROM judge_submission WHERE submission_id = 'rejudged'`)
			}},
		{store.RuleReaperStuck, func(_ *testing.T, d busyDatabase, _ *testBundle) int64 { return d.running },
			func(t *testing.T, d busyDatabase, b *testBundle) {
				b.exec(t, `UPDATE judge_job SET lease_until = NOW(6) - INTERVAL 1 HOUR WHERE id = ?`, d.running)
			}},
		{store.RuleNodeOverCapacity, func(_ *testing.T, d busyDatabase, _ *testBundle) int64 { return d.sess.NodeID },
			func(t *testing.T, d busyDatabase, b *testBundle) {
				// A claim granted past capacity: the slots were 0 before the lease.
				b.exec(t, `UPDATE judge_node SET slots = 0, updated_at = NOW(6) - INTERVAL 1 HOUR WHERE id = ?`, d.sess.NodeID)
			}},
		{store.RuleReceiptOnLiveJob, func(*testing.T, busyDatabase, *testBundle) int64 { return 0 },
			func(t *testing.T, d busyDatabase, b *testBundle) {
				b.exec(t, `UPDATE judge_job SET state = 'QUEUED', node_id = NULL, lease_until = NULL WHERE id = ?`, d.completed)
			}},
		{store.RuleSupersededLive, func(_ *testing.T, d busyDatabase, _ *testBundle) int64 { return d.oldGen },
			func(t *testing.T, d busyDatabase, b *testBundle) {
				b.exec(t, `UPDATE judge_job SET state = 'QUEUED' WHERE id = ?`, d.oldGen)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			d := b.busyDatabase(t)
			rep, err := b.Store.Reconcile(b.Ctx)
			require.NoError(t, err)
			require.True(t, rep.OK(), "healthy before the corruption: %+v", rep.Violations)
			tc.plant(t, d, b)
			rep, err = b.Store.Reconcile(b.Ctx)
			require.NoError(t, err)
			require.False(t, rep.OK())
			var found *store.Violation
			for i, v := range rep.Violations {
				if v.Rule == tc.rule {
					found = &rep.Violations[i]
				}
			}
			require.NotNil(t, found, "want %s in %+v", tc.rule, rep.Violations)
			require.NotEmpty(t, found.Message)
			if want := tc.subject(t, d, b); want != 0 {
				require.Equal(t, want, found.SubjectID)
			}
			var csv strings.Builder
			require.NoError(t, rep.WriteCSV(&csv))
			lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
			require.Equal(t, "rule,subject_type,subject_id,message,details", lines[0])
			require.GreaterOrEqual(t, len(lines), 2)
			require.Contains(t, csv.String(), tc.rule+","+found.SubjectType+","+strconv.FormatInt(found.SubjectID, 10)+",")
		})
	}
}

func (b *testBundle) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	_, err := b.DB.ExecContext(b.Ctx, q, args...)
	require.NoError(t, err)
}
