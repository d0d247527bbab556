package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/store"
)

func TestBusinessQueries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec, err := b.Store.Manifests().ManifestRecord(b.Ctx, store.Tenant{}, b.Manifest)
	require.NoError(t, err)
	require.Len(t, rec.Manifest.Cases, 2)
	require.Len(t, rec.Digest, 64)
	require.False(t, rec.CreatedAt.IsZero())
	_, err = b.Store.Manifests().ManifestRecord(b.Ctx, store.Tenant{}, 999999)
	require.ErrorIs(t, err, store.ErrNotFound)

	in := b.Artifact(t, "1 2\n")
	sizes, err := b.Store.Manifests().ArtifactSizes(b.Ctx, store.Tenant{}, []string{in, in, "0000000000000000000000000000000000000000000000000000000000000000"})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{in: 4}, sizes)

	_, err = b.DB.ExecContext(b.Ctx, `INSERT INTO judge_settlement_event (job_id, event_type, submission_type, submission_id, generation, payload)
		VALUES (1, 'SETTLED', 'ALGO', 'a', 1, '{}'), (2, 'SETTLED', 'ALGO', 'b', 1, '{}')`)
	require.NoError(t, err)
	evs, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "one", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	evs2, err := b.Store.Events().ClaimEvents(b.Ctx, store.EventScope{}, "two", 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, evs2, 1)
	out, err := b.Store.Events().AckEventsFor(b.Ctx, store.EventScope{}, "one", []int64{evs[0].ID, evs2[0].ID, evs[0].ID, 424242})
	require.NoError(t, err)
	require.Equal(t, []int64{evs[0].ID}, out.Acked)
	require.Equal(t, []int64{evs2[0].ID, 424242}, out.NotHeld)
	out, err = b.Store.Events().AckEventsFor(b.Ctx, store.EventScope{}, "one", []int64{evs[0].ID})
	require.NoError(t, err)
	require.Equal(t, []int64{evs[0].ID}, out.Acked, "acknowledging again is idempotent")
}
