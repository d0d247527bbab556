package checks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/checks"
	"github.com/kece-oj/kece/control/dbtest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

func TestEveryPoolHasAValidCheck(t *testing.T) {
	t.Parallel()
	for _, pool := range contracts.Pools() {
		p, err := checks.For(pool)
		require.NoError(t, err, pool)
		got, err := manifest.PoolForLanguage(p.Language)
		require.NoError(t, err)
		require.Equal(t, pool, got, "the check's language runs on its own pool")
		require.NoError(t, manifest.CheckPoolKind(pool, p.Manifest.Kind))
		require.NotEmpty(t, p.Source)
		for d, size := range p.Manifest.Digests() {
			require.Len(t, p.Files[d], int(size), "every referenced artifact is shipped")
		}
	}
	_, err := checks.For("cobol")
	require.Error(t, err)
}

func TestPublishIsIdempotent(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.Open(t)
	st, err := store.New(db, store.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	arts, err := artifact.OpenStore(ctx, artifact.StoreConfig{Root: t.TempDir()})
	require.NoError(t, err)
	ids := map[int64]bool{}
	for _, pool := range contracts.Pools() {
		a, err := checks.Publish(ctx, st, arts, pool)
		require.NoError(t, err)
		b, err := checks.Publish(ctx, st, arts, pool)
		require.NoError(t, err)
		require.Equal(t, a.ManifestID, b.ManifestID, pool)
		ids[a.ManifestID] = true
		m, err := st.Manifests().Manifest(ctx, a.ManifestID)
		require.NoError(t, err)
		require.Equal(t, manifest.KindForPool(pool), m.Kind)
		for d := range m.Digests() {
			f, _, err := arts.Open(d)
			require.NoError(t, err, "artifact %s is stored", d)
			f.Close()
		}
	}
	// The four code pools share one manifest (same cases); mysql has its own.
	require.Len(t, ids, 2)
}
