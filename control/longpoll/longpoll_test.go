package longpoll

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"
)

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// NotifyN wakes exactly n waiters of the pool, longest waiting first;
// Notify wakes the rest; other pools and later watchers are untouched; Done
// of a woken or a still-waiting watcher keeps the count right.
func TestNotifyNWakesLongestWaitingFirst(t *testing.T) {
	t.Parallel()
	h := New()
	a, b, c := h.Watch("cpp"), h.Watch("cpp"), h.Watch("cpp")
	other := h.Watch("java")
	h.NotifyN("cpp", 1)
	if !woken(a) || woken(b) || woken(c) || woken(other) {
		t.Fatalf("NotifyN(1) woke a=%v b=%v c=%v java=%v, want only a", woken(a), woken(b), woken(c), woken(other))
	}
	h.Done(a)
	h.Done(c) // c leaves without being woken
	h.NotifyN("cpp", 5)
	if !woken(b) || woken(c) {
		t.Fatalf("NotifyN(5) woke b=%v c=%v, want b only (c had left)", woken(b), woken(c))
	}
	d := h.Watch("cpp")
	if woken(d) {
		t.Fatal("a watcher after the wake-up is woken by it")
	}
	h.Notify("cpp")
	h.Notify("java")
	if !woken(d) || !woken(other) {
		t.Fatal("Notify did not wake every waiter")
	}
	h.Done(b)
	h.Done(d)
	h.Done(other)
	h.Done(other) // a second Done is harmless
	if h.waiting != 0 || len(h.elems) != 0 {
		t.Fatalf("waiting=%d elems=%d after every Done, want 0", h.waiting, len(h.elems))
	}
}

// fakeSignals is a SignalSource the test moves; each read sends on reads
// (buffered, never blocking Run: a read finding it full is not counted).
// A read can be parked (between) so the test changes things at a known
// point of Run's loop.
type fakeSignals struct {
	mu     sync.Mutex
	sig    map[string]Signal
	reads  chan struct{}
	hold   chan struct{} // non-nil: the next read parks until it is closed
	parked chan struct{} // a read parked
}

func newFakeSignals() *fakeSignals {
	return &fakeSignals{sig: map[string]Signal{}, reads: make(chan struct{}, 8), parked: make(chan struct{}, 1)}
}

func (f *fakeSignals) PoolSignals(ctx context.Context) (map[string]Signal, error) {
	f.mu.Lock()
	sig := maps.Clone(f.sig)
	hold := f.hold
	f.hold = nil
	// Sent under mu, with the read itself: a read that saw a value set
	// before it cannot send after polled has drained the channel.
	select {
	case f.reads <- struct{}{}:
	default:
	}
	f.mu.Unlock()
	if hold != nil {
		f.parked <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	return sig, nil
}

func (f *fakeSignals) set(pool string, s Signal) {
	f.mu.Lock()
	f.sig[pool] = s
	f.mu.Unlock()
}

// between runs change while Run is parked inside a read, which returns
// what it read before change. Run takes its snapshot of the jobs NotifyN
// heard of before it reads, so without the park a change of NotifyN and
// the signal could fall between the two (a job woken for here and counted
// as another replica's too); parked, the read in flight sees neither and
// the next one, after it, sees both.
func (f *fakeSignals) between(t *testing.T, change func()) {
	t.Helper()
	hold := make(chan struct{})
	f.mu.Lock()
	f.hold = hold
	f.mu.Unlock()
	select {
	case <-f.parked:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not read the source")
	}
	change()
	close(hold)
}

// polled waits until Run has read the source twice more, so the value set
// before it has been acted on: the first read after the drain saw it, and
// Run reads again only once it has acted on the first.
func (f *fakeSignals) polled(t *testing.T) {
	t.Helper()
	// Drop the reads from before: every one left in the channel now was
	// sent before this point, so it may predate the value set.
	for drained := false; !drained; {
		select {
		case <-f.reads:
		default:
			drained = true
		}
	}
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for i := range 2 {
		select {
		case <-f.reads:
		case <-timeout.C:
			t.Fatalf("Run did not poll: %d of 2 reads in 5 s", i)
		}
	}
}

// The signal poll wakes one waiter per job made on another replica, none
// more for jobs this replica already woke waiters for (NotifyN), and every
// waiter when work became ready again (Bumps).
func TestRunWakesWaitersForWhatMoved(t *testing.T) {
	t.Parallel()
	h := New()
	h.sweep = time.Hour // no sweep in this test, however slow the machine
	src := newFakeSignals()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ws []<-chan struct{}
	for range 6 {
		ws = append(ws, h.Watch("cpp"))
	}
	go h.Run(ctx, src, time.Millisecond, func(error) {})
	count := func() int {
		n := 0
		for _, w := range ws {
			if woken(w) {
				n++
			}
		}
		return n
	}
	for _, step := range []struct {
		what  string
		local int    // jobs NotifyN is told of first
		sig   Signal // then the poll reads this
		want  int    // waiters woken so far
	}{
		// The first read is a baseline that may already hold jobs made
		// after the waiters' claim tries: everyone tries again.
		{"the first poll", 0, Signal{Bumps: 5, NewestJob: 100}, 6},
		{"two jobs on another replica", 0, Signal{Bumps: 5, NewestJob: 102}, 2},
		{"one job here (NotifyN wakes one; the poll no other)", 1, Signal{Bumps: 5, NewestJob: 103}, 3},
		{"work ready again (a requeue): everyone", 0, Signal{Bumps: 6, NewestJob: 103}, 6},
	} {
		src.between(t, func() {
			if step.local > 0 {
				h.NotifyN("cpp", step.local)
			}
			src.set("cpp", step.sig)
		})
		src.polled(t)
		if n := count(); n != step.want {
			t.Fatalf("%s: %d waiters woken in all, want %d", step.what, n, step.want)
		}
		if step.what == "the first poll" { // fresh waiters for the steps after it
			for i, w := range ws {
				h.Done(w)
				ws[i] = h.Watch("cpp")
			}
		}
	}
	for _, w := range ws {
		h.Done(w)
	}
}
