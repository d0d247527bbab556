package store_test

import (
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/store"
)

func (b *testBundle) settleJobs(t *testing.T, n int) {
	t.Helper()
	g := b.Group(t, 64)
	sess := b.Node(t, "cpp", g.ID, 16, true)
	for i := range n {
		b.Enqueue(t, "ALGO", fmt.Sprintf("ev-%d", i))
	}
	for done := 0; done < n; {
		got, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 16)
		require.NoError(t, err)
		for _, c := range got {
			_, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, storetest.ACResult())
			require.NoError(t, err)
			done++
		}
	}
}

// T23 (events): two consumers in two replicas race: every event is
// delivered, none is acknowledged twice.
func TestTwoConsumersRacingSkipNothingAndAckOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 60
	b.settleJobs(t, n)
	replicas := []*store.Store{b.Store, b.SecondReplica(t)}
	var mu sync.Mutex
	acked := map[int64]string{}
	var wg sync.WaitGroup
	for i, st := range replicas {
		consumer := fmt.Sprintf("business-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				evs, err := st.Events().ClaimEvents(b.Ctx, store.EventScope{}, consumer, 7, time.Minute)
				require.NoError(t, err)
				if len(evs) == 0 {
					return
				}
				ids := make([]int64, len(evs))
				for i, e := range evs {
					ids[i] = e.ID
					require.Equal(t, store.SettledEventType, e.EventType)
				}
				k, err := st.Events().AckEvents(b.Ctx, store.EventScope{}, consumer, ids)
				require.NoError(t, err)
				require.Equal(t, len(ids), k)
				mu.Lock()
				for _, id := range ids {
					if prev, dup := acked[id]; dup {
						t.Errorf("event %d acknowledged by %s and %s", id, prev, consumer)
					}
					acked[id] = consumer
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, acked, n)
	require.Equal(t, n, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE state = 'DELIVERED'`))
}

// A claim reads its candidates without locks and then locks them: a
// candidate another transaction holds is passed over, and the claim still
// fills its room from the events behind it; the held one is delivered once
// it is free.
func TestEventClaimPassesOverAHeldCandidate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.settleJobs(t, 3)
	var first int64
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT MIN(id) FROM judge_settlement_event`).Scan(&first))
	tx, err := b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var held int64
	require.NoError(t, tx.QueryRowContext(b.Ctx, `SELECT id FROM judge_settlement_event WHERE id = ? FOR UPDATE`, first).Scan(&held))

	evs, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "a", 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, evs, 2, "the room is filled from behind the held candidate")
	for _, e := range evs {
		require.NotEqual(t, first, e.ID)
	}
	require.NoError(t, tx.Rollback())
	rest, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "b", 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, first, rest[0].ID)
}

// An event whose consumer lease runs out is delivered again, and the late
// ack of the first consumer no longer counts.
func TestUnackedEventIsRedelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.settleJobs(t, 1)
	evs, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "a", 10, time.Second)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	none, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "b", 10, time.Second)
	require.NoError(t, err)
	require.Empty(t, none, "leased to a")
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_settlement_event SET lease_until = NOW(6) - INTERVAL 1 SECOND`)
	require.NoError(t, err)
	again, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "b", 10, time.Second)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, evs[0].ID, again[0].ID)
	require.Equal(t, 2, again[0].DeliveryAttempt)
	k, err := b.Store.Events().AckEvents(b.Ctx, store.EventScope{}, "a", []int64{evs[0].ID})
	require.NoError(t, err)
	require.Zero(t, k, "a's lease is gone")
	k, err = b.Store.Events().AckEvents(b.Ctx, store.EventScope{}, "b", []int64{evs[0].ID})
	require.NoError(t, err)
	require.Equal(t, 1, k)
}

// A consumer's lease is written outside the ready index: leasing an event
// leaves its next_attempt_at (the ready index's key) as it was and sets
// lease_until, which keeps the event from other consumers until it runs
// out; the admin view shows the lease's end as when the event is next due.
// A failed push clears the lease, so the event is due after its backoff
// alone.
func TestEventLeaseRewritesNoReadyIndexEntry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.settleJobs(t, 1)
	var ready0 time.Time
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT next_attempt_at FROM judge_settlement_event`).Scan(&ready0))
	evs, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	var ready1, leaseUntil, dbNow time.Time
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT next_attempt_at, lease_until, NOW(6) FROM judge_settlement_event`).
		Scan(&ready1, &leaseUntil, &dbNow))
	require.Equal(t, ready0, ready1, "the lease does not move the ready index's key")
	require.WithinDuration(t, dbNow.Add(time.Minute), leaseUntil, 5*time.Second)

	none, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, none, "due by next_attempt_at, but leased to a")
	page, err := b.Store.Events().ListEventsPage(b.Ctx, store.EventFilter{State: store.EventPending})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.True(t, page[0].NextAttemptAt.Equal(leaseUntil), "next due: %s, lease until %s", page[0].NextAttemptAt, leaseUntil)

	require.NoError(t, b.Store.Events().FailEventDelivery(b.Ctx, store.EventScope{}, "a", evs[0].ID, "502", time.Hour, 5))
	var lease sql.NullTime
	require.NoError(t, b.DB.QueryRowContext(b.Ctx, `SELECT next_attempt_at, lease_until FROM judge_settlement_event`).Scan(&ready1, &lease))
	require.False(t, lease.Valid, "a failed push ends the lease")
	require.WithinDuration(t, dbNow.Add(time.Hour), ready1, 5*time.Second, "and the backoff is the next attempt")
	page, err = b.Store.Events().ListEventsPage(b.Ctx, store.EventFilter{State: store.EventPending})
	require.NoError(t, err)
	require.True(t, page[0].NextAttemptAt.Equal(ready1))
	none, err = b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, none, "not due before its backoff")
}

// An event whose id commits after a higher id was consumed is still delivered:
// the feed is leased rows, not an id cursor.
func TestLateCommittingEventIsNotSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tx, err := b.DB.BeginTx(b.Ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(b.Ctx,
		`INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
		 VALUES (1000001, 'SETTLED', 'ALGO', 'late', 1, '{}')`)
	require.NoError(t, err) // holds the lower id, not yet committed
	b.settleJobs(t, 1)      // a higher id commits first
	evs, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "c", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	_, err = b.Store.Events().AckEvents(b.Ctx, store.EventScope{}, "c", []int64{evs[0].ID})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	late, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "c", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, late, 1)
	require.Less(t, late[0].ID, evs[0].ID, "the late row has the lower id and is still delivered")
}

func TestRedeliverOnlyDeadEvents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.settleJobs(t, 2)
	evs, err := b.Store.Events().ListEventsPage(b.Ctx, store.EventFilter{})
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Greater(t, evs[0].ID, evs[1].ID, "newest first")
	dead := evs[1].ID
	b.exec(t, `UPDATE judge_settlement_event SET state = 'DEAD', attempts = 5, last_error = 'HTTP 500' WHERE id = ?`, dead)

	page, err := b.Store.Events().ListEventsPage(b.Ctx, store.EventFilter{State: store.EventDead})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "HTTP 500", page[0].LastError)
	page, err = b.Store.Events().ListEventsPage(b.Ctx, store.EventFilter{BeforeID: evs[0].ID})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, dead, page[0].ID)

	ev, err := b.Store.Events().RedeliverEvent(b.Ctx, dead, "admin", "receiver fixed")
	require.NoError(t, err)
	require.Equal(t, store.EventPending, ev.State)
	require.Zero(t, ev.DeliveryAttempt)
	claimed, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "consumer-a", 10, 30*time.Second)
	require.NoError(t, err)
	require.Len(t, claimed, 2, "the redelivered event is claimable again")

	_, err = b.Store.Events().RedeliverEvent(b.Ctx, dead, "admin", "again")
	require.ErrorIs(t, err, store.ErrEventNotDead)
	_, err = b.Store.Events().RedeliverEvent(b.Ctx, 999999, "admin", "x")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_audit WHERE action = 'event.redeliver' AND reason = 'receiver fixed'`))
}
