package longpoll

import (
	"testing"
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
