package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/controltest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/worker"
)

// everyType is the fake executor reporting every problem type, so that
// interactive and communication jobs are handed to it.
type everyType struct{ *fakeBackend }

func (e everyType) Health(ctx context.Context) worker.Health {
	h := e.fakeBackend.Health(ctx)
	h.Features = contracts.Features()
	return h
}

// A node counts a job's slot weight as the control plane does: a
// communication job of three processes holds all 4 of its slots while it
// runs (healthz, the heartbeat's busy slots). It reaches the node through
// the result that freed the node's last busy slot, whose claim asks for
// every slot then free — not through the claim loop's long-poll, sent when
// one slot was free, coming back; and the job queued behind it, never
// handed out past it, follows with its result.
func TestNodeCountsSlotWeights(t *testing.T) {
	t.Parallel()
	e := env(t, 5*time.Second)
	src := e.PutArtifact([]byte("// manager\n"))
	comm := e.PublishCodeManifest(manifest.Manifest{Kind: manifest.KindCode,
		Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 64, OutputKb: 64},
		Checker: manifest.Checker{Type: manifest.CheckerCommunication, Special: &manifest.SpecialChecker{Language: "cpp17",
			SourceSha256: src, SourceSize: int64(len("// manager\n")), Processes: 3}}},
		controltest.Case{In: "1\n", Out: "1\n", Weight: 100})
	echo := publishEcho(e)
	nd := e.NewNode("cpp", 4, 8)
	e.ForceEnable(nd.ID)
	fake := newFake(true)
	cfg := nodeConfig(t, e.URL, "cpp", nd.JoinCode, everyType{fake})
	cfg.LocalSlots = 4
	n := runNode(t, cfg)

	light := []int64{enqueue(e, "cpp17", echo), enqueue(e, "cpp17", echo), enqueue(e, "cpp17", echo)}
	for range light {
		fake.waitStarted(t, 10*time.Second)
	}
	require.Eventually(t, func() bool { return healthz(t, n).SlotsBusy == 3 }, 10*time.Second, 10*time.Millisecond)
	heavy := enqueue(e, "cpp17", comm)
	behind := enqueue(e, "cpp17", echo)
	for i, id := range light {
		fake.release(idStr(id))
		waitJob(t, e, id, 10*time.Second, "completed", completed)
		require.Eventually(t, func() bool { return healthz(t, n).SlotsBusy == 2-i || i == 2 }, 10*time.Second, 10*time.Millisecond)
	}
	require.Equal(t, idStr(heavy), fake.waitStarted(t, 10*time.Second))
	require.Equal(t, int64(1), n.Metrics().CycleJobs, "leased with the result of the last light job")
	require.Equal(t, 4, healthz(t, n).SlotsBusy, "weight 4 held")
	j, err := e.Store.Jobs().GetJob(e.Ctx, behind)
	require.NoError(t, err)
	require.Equal(t, store.StateQueued, j.State, "nothing beside it")

	fake.release(idStr(heavy))
	require.Equal(t, idStr(behind), fake.waitStarted(t, 10*time.Second))
	require.Eventually(t, func() bool { return healthz(t, n).SlotsBusy == 1 }, 10*time.Second, 10*time.Millisecond)
	fake.release(idStr(behind))
	waitJob(t, e, behind, 10*time.Second, "completed", completed)
	require.Eventually(t, func() bool { return healthz(t, n).SlotsBusy == 0 }, 10*time.Second, 10*time.Millisecond)
}
