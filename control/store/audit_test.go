package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestListAuditFiltersAndRecordsTheCaller(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := b.Group(t, 4) // host_group.create by "test", no caller address
	ctx := store.WithCaller(b.Ctx, "192.0.2.7")
	n, _, err := b.Store.Nodes().CreateNode(ctx, store.NodeSpec{Name: "audit-n", Pool: "cpp", HostGroupID: g.ID, Slots: 1}, "ADMIN:alice")
	require.NoError(t, err)
	require.NoError(t, b.Store.AuditLog().RecordNodeAction(ctx, n.ID, "ADMIN:alice", "node.probe", "maintenance", nil))
	j := b.Enqueue(t, "ALGO", "a-1")
	_, err = b.Store.Jobs().CancelJob(store.WithCaller(b.Ctx, "2001:db8::1"), j.JobID, "ADMIN:bob", "duplicate")
	require.NoError(t, err)

	// One entry per hour, so time bounds pick exact ones.
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	_, err = b.DB.ExecContext(b.Ctx, `UPDATE judge_audit SET created_at = ? + INTERVAL id HOUR`, day)
	require.NoError(t, err)

	list := func(f store.AuditFilter) []store.AuditEntry {
		t.Helper()
		out, err := b.Store.AuditLog().ListAudit(b.Ctx, f)
		require.NoError(t, err)
		return out
	}
	all := list(store.AuditFilter{})
	require.Len(t, all, 4)
	require.Equal(t, "job.cancel", all[0].Action, "newest first")
	require.Equal(t, "2001:db8::1", all[0].RemoteAddr)
	require.Equal(t, j.JobID, all[0].JobID)
	require.Equal(t, "host_group.create", all[3].Action)
	require.Empty(t, all[3].RemoteAddr, "no caller in the context, none recorded")

	alice := list(store.AuditFilter{Actor: "ADMIN:alice"})
	require.Len(t, alice, 2)
	for _, e := range alice {
		require.Equal(t, "192.0.2.7", e.RemoteAddr)
		require.Equal(t, n.ID, e.NodeID)
	}
	drains := list(store.AuditFilter{Action: "node.probe", NodeID: n.ID})
	require.Len(t, drains, 1)
	require.Equal(t, "maintenance", drains[0].Reason)
	require.Len(t, list(store.AuditFilter{JobID: j.JobID}), 1)
	require.Empty(t, list(store.AuditFilter{Actor: "ADMIN:alice", Action: "job.cancel"}))

	// Time bounds: after inclusive, before exclusive.
	require.Equal(t, []store.AuditEntry{all[0]}, list(store.AuditFilter{After: all[0].CreatedAt}))
	require.Empty(t, list(store.AuditFilter{Before: all[3].CreatedAt}))
	require.Equal(t, all[1:3], list(store.AuditFilter{After: all[2].CreatedAt, Before: all[0].CreatedAt}))

	// Keyset pages.
	var seen []int64
	f := store.AuditFilter{Limit: 3}
	for {
		page := list(f)
		for _, e := range page {
			seen = append(seen, e.ID)
		}
		if len(page) < f.Limit {
			break
		}
		f.BeforeID = page[len(page)-1].ID
	}
	require.Equal(t, []int64{all[0].ID, all[1].ID, all[2].ID, all[3].ID}, seen)

	_, err = b.Store.AuditLog().ListAudit(b.Ctx, store.AuditFilter{After: day, Before: day})
	require.ErrorIs(t, err, store.ErrValidation)
	_, err = b.Store.AuditLog().ListAudit(b.Ctx, store.AuditFilter{Limit: store.PageLimitMax + 1})
	require.ErrorIs(t, err, store.ErrValidation)
}
