package worker

// The replica failover client: which replica a call goes to, each attempt's
// deadline, moving off a replica that hangs or fails (and abandoning what
// is still in flight there), and hedging a slow renew to the next replica.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// client speaks the machine protocol through the generated client, to one
// of the control plane's replicas (KECE_CONTROL_URL may list several). The
// session token is swapped atomically when a session is (re)opened; it is
// valid on every replica (sessions live in the control database).
//
// Every attempt carries a deadline from what is at stake (callOpts): the
// claim long-poll its wait plus a small slack, a renew or a result a share
// of the time its lease has left, everything else the request timeout. When
// a replica fails a call in a way another replica may not — no answer
// within the deadline, a network error, 502/503/504 — the client moves to
// the next replica for this and later calls, keeping the session, and every
// other call still waiting on the replica it left is abandoned and sent to
// the next one at once (all of them are safe to repeat). Calls that are
// safe to repeat are repeated there at once, each replica tried once,
// before the caller backs off.
//
// A replica left because it did not answer in time is remembered as hung
// until a liveness check of it, sent in the background every liveness
// interval, is answered: until then no failure of the replica in use sends
// the client back to it (a network error there, a slow answer while its
// database waits out the hung replica's locks). A call whose answer was
// cut on the network is first tried once more on the same replica.
type client struct {
	bases   []string
	cur     atomic.Int32 // index of the replica in use
	http    *http.Client
	token   atomic.Pointer[string]
	cs      []*machineapi.ClientWithResponses
	raws    []*machineapi.Client
	timeout time.Duration
	// claimSlack is added to a claim's wait for its deadline.
	claimSlack time.Duration
	// liveEvery is how often a replica holding a claim long-poll is asked
	// whether it lives (watch); 0: never.
	liveEvery time.Duration
	// offMu guards off: per replica, a channel closed when the client moves
	// off that replica, which abandons the calls still waiting on it.
	offMu sync.Mutex
	off   []chan struct{}
	// moved is told when the client moves to another replica (for a log
	// line); may be nil.
	moved func(from, to string, err error)
	// hedged counts renews sent to a second replica because the first was
	// slow, and hedgeWon those the second answered first.
	hedged, hedgeWon atomic.Int64
	// moves counts moves to the next replica; liveChecks the liveness
	// checks answered.
	moves, liveChecks atomic.Int64
	// hungSince is, per replica, when the client left it because it did
	// not answer in time (UnixNano), until a liveness check of it is
	// answered (0: not hung). recheck clears it.
	hungSince []atomic.Int64
	// life ends with close: it bounds the background liveness checks.
	life    context.Context
	endLife context.CancelFunc
}

// newClient builds a client over one or more base URLs (ControlURLs).
func newClient(bases []string, timeout time.Duration) (*client, error) {
	if len(bases) == 0 {
		return nil, errors.New("control client: no control URL")
	}
	cl := &client{bases: bases, timeout: timeout, claimSlack: min(ClaimSlackDefault, timeout),
		// No client-wide timeout: calls carry their own deadlines (the claim
		// long-poll is longer than every other call).
		http: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	empty := ""
	cl.token.Store(&empty)
	auth := machineapi.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		if t := *cl.token.Load(); t != "" {
			req.Header.Set("Authorization", "Bearer "+t)
		}
		return nil
	})
	for _, base := range bases {
		c, err := machineapi.NewClientWithResponses(base, machineapi.WithHTTPClient(cl.http), auth)
		if err != nil {
			return nil, fmt.Errorf("control client: %w", err)
		}
		raw, err := machineapi.NewClient(base, machineapi.WithHTTPClient(cl.http), auth)
		if err != nil {
			return nil, fmt.Errorf("control client: %w", err)
		}
		cl.cs, cl.raws = append(cl.cs, c), append(cl.raws, raw)
		cl.off = append(cl.off, make(chan struct{}))
	}
	cl.hungSince = make([]atomic.Int64, len(bases))
	cl.life, cl.endLife = context.WithCancel(context.Background())
	return cl, nil
}

func (cl *client) close() {
	cl.endLife()
	cl.http.CloseIdleConnections()
}

// Causes of an attempt that ended without an answer while its caller still
// waits: both are failures of the replica, not cancellations.
var (
	errAttemptTimeout = errors.New("no answer from the control replica within the call's deadline")
	errAbandoned      = errors.New("the node moved off this control replica while the call waited")
	errSlowReplica    = errors.New("the next control replica answered a hedged renew first")
	errNotAlive       = errors.New("the control replica holding the call did not answer a liveness check in time")
)

// replicaFailed reports whether err is a failure of the replica rather than
// an answer about the request: another replica may succeed.
func replicaFailed(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusBadGateway || ae.Status == http.StatusServiceUnavailable || ae.Status == http.StatusGatewayTimeout
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// notSent reports whether the request certainly never reached a replica
// (the connection was refused), so even a call that must not run twice may
// be sent to another one.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// repeat says when a call that failed on one replica is sent to the next
// at once.
type repeat int

const (
	// repeatAlways: the call is idempotent (same boot id, same lease epoch,
	// same result payload, same claim request id).
	repeatAlways repeat = iota
	// repeatIfUnsent: the call is not idempotent (a join spends its code):
	// only when it certainly was not sent, or the replica answered 503 (it
	// did nothing).
	repeatIfUnsent
)

// callOpts is what one call's attempts are allowed.
type callOpts struct {
	rp repeat
	// fixed is each attempt's deadline (0: the request timeout), unless by
	// is set.
	fixed time.Duration
	// by is when what the call keeps alive ends (a lease's local deadline):
	// each attempt gets half the time left (at least minAttempt, at most the
	// request timeout), so the next replica can still be tried before it.
	by time.Time
	// hedge, when positive, sends the call to the next replica too if the
	// first has not answered within it; the first answer wins.
	hedge time.Duration
}

// minAttempt is the shortest deadline an attempt gets, however little time
// its lease has left.
const minAttempt = 200 * time.Millisecond

func (cl *client) attemptTimeout(o callOpts) time.Duration {
	if !o.by.IsZero() {
		return min(cl.timeout, max(minAttempt, time.Until(o.by)/2))
	}
	if o.fixed > 0 {
		return o.fixed
	}
	return cl.timeout
}

// timedOut: the replica did not answer in time (rather than refusing the
// connection or answering 502/503/504).
func timedOut(err error) bool {
	return errors.Is(err, errAttemptTimeout) || errors.Is(err, errStalled) || errors.Is(err, errNotAlive)
}

// cutAnswer: the call reached the replica (the connection was made) and
// its answer was lost on the network — reset, or closed before a whole
// answer — rather than late (timedOut), refused (notSent) or a 5xx. The
// replica answered moments ago; a lost packet or a proxy's cut is far more
// likely than its end, so the call is tried there once more before the
// client moves.
func cutAnswer(err error) bool {
	if err == nil || timedOut(err) || errors.Is(err, errAbandoned) || notSent(err) {
		return false
	}
	var oe *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &oe)
}

// moveOff makes the next replica after idx that is not hung the one in
// use, unless another call moved already or every other replica is hung
// (left without an answer and not answering a liveness check since: the
// client stays, and the caller retries here). It abandons the calls still
// waiting on idx, marks idx hung when it did not answer in time, and
// reports the move (with why) to moved. It says whether it moved.
func (cl *client) moveOff(idx int, why error) bool {
	next := cl.nextLive(idx)
	if next < 0 || !cl.cur.CompareAndSwap(int32(idx), int32(next)) {
		return false
	}
	if timedOut(why) {
		cl.markHung(idx)
	}
	cl.moves.Add(1)
	cl.offMu.Lock()
	close(cl.off[idx])
	cl.off[idx] = make(chan struct{})
	cl.offMu.Unlock()
	if cl.moved != nil {
		cl.moved(cl.bases[idx], cl.bases[next], why)
	}
	return true
}

// nextLive is the first replica after idx (in KECE_CONTROL_URL's order)
// that is not hung; -1 when there is none.
func (cl *client) nextLive(idx int) int {
	for k := 1; k < len(cl.cs); k++ {
		if c := (idx + k) % len(cl.cs); cl.hungSince[c].Load() == 0 {
			return c
		}
	}
	return -1
}

// markHung remembers replica idx as hung and, unless one runs already,
// starts the background liveness checks that end it.
func (cl *client) markHung(idx int) {
	if cl.hungSince[idx].Swap(time.Now().UnixNano()) == 0 {
		go cl.recheck(idx)
	}
}

// recheckEvery is the pace and the bound of the liveness checks of a hung
// replica: the liveness interval, or (a client without one, as a join's)
// a second at most.
func (cl *client) recheckEvery() time.Duration {
	if cl.liveEvery > 0 {
		return cl.liveEvery
	}
	return min(LivenessIntervalDefault, cl.timeout)
}

// recheck sends a liveness check to the hung replica idx every
// recheckEvery, each bounded by it, and clears its mark at the first
// answer, unless it was marked again while the check was on its way (that
// mark needs an answer of its own). It never blocks a call: calls go to
// the replica in use meanwhile. It ends with the client.
func (cl *client) recheck(idx int) {
	every := cl.recheckEvery()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-cl.life.Done():
			return
		case <-t.C:
		}
		mark := cl.hungSince[idx].Load()
		if cl.alive(cl.life, idx, every) == nil && cl.hungSince[idx].CompareAndSwap(mark, 0) {
			return
		}
	}
}

// offSignal is closed when the client next moves off replica idx.
func (cl *client) offSignal(idx int) <-chan struct{} {
	cl.offMu.Lock()
	defer cl.offMu.Unlock()
	return cl.off[idx]
}

// attempt is a timed result of one try on one replica.
type attempt[T any] struct {
	v    T
	err  error
	idx  int
	sent time.Time // when this try was sent (monotonic)
	got  time.Time // when its answer was received (monotonic)
}

// try runs call once on replica idx under the attempt's deadline; a
// deadline that passes, or a move off idx meanwhile, ends it with a replica
// failure (errAttemptTimeout, errAbandoned) while ctx still lives.
func try[T any](cl *client, ctx context.Context, idx int, o callOpts, call func(context.Context, int) (T, error)) attempt[T] {
	a := attempt[T]{idx: idx, sent: time.Now()}
	deadline := cl.attemptTimeout(o)
	tctx, cancelT := context.WithTimeoutCause(ctx, deadline, errAttemptTimeout)
	defer cancelT()
	actx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	off := cl.offSignal(idx)
	if cl.cur.Load() != int32(idx) {
		off = nil // a hedge or a repeat on a replica not in use
	}
	go func() {
		select {
		case <-off:
			cancel(errAbandoned)
		case <-actx.Done():
		}
	}()
	if cl.watched(deadline) {
		go cl.watch(actx, idx, cl.liveEvery, cancel)
	}
	a.v, a.err = call(actx, idx)
	a.got = time.Now()
	if a.err != nil && ctx.Err() == nil {
		if cause := context.Cause(actx); errors.Is(cause, errAttemptTimeout) || errors.Is(cause, errAbandoned) || errors.Is(cause, errNotAlive) {
			a.err = fmt.Errorf("%w (%v)", cause, a.err)
		}
	}
	return a
}

// do runs call on the replica in use, moving on as the type comment says;
// the attempt returned is the one whose answer (or last error) counts.
func do[T any](cl *client, ctx context.Context, o callOpts, call func(context.Context, int) (T, error)) attempt[T] {
	n := len(cl.cs)
	idx := int(cl.cur.Load())
	if o.hedge > 0 && n > 1 && cl.nextLive(idx) >= 0 {
		return hedged(cl, ctx, o, call)
	}
	var a attempt[T]
	for tried := 1; ; tried++ {
		a = try(cl, ctx, idx, o, call)
		if n > 1 && o.rp == repeatAlways && ctx.Err() == nil && cutAnswer(a.err) {
			// Before a move: with one replica the caller retries anyway.
			a = try(cl, ctx, idx, o, call)
		}
		if a.err == nil || ctx.Err() != nil || !replicaFailed(a.err) || n == 1 {
			return a
		}
		cl.moveOff(idx, a.err)
		next := int(cl.cur.Load())
		if next == idx || tried >= n {
			return a // staying (the others are hung), or each tried once: the caller retries
		}
		var ae *APIError
		unsent := notSent(a.err) || (errors.As(a.err, &ae) && ae.Status == http.StatusServiceUnavailable)
		if o.rp == repeatIfUnsent && !unsent {
			return a
		}
		idx = next
	}
}

// hedged runs call on the replica in use and, if it has not answered within
// o.hedge, on the next one too; the first success wins (and a win of the
// second moves the client there). An answer about the request (not a
// replica failure) ends the call at once.
//
// The second is the next replica that is not hung (do hedges only when
// there is one).
func hedged[T any](cl *client, ctx context.Context, o callOpts, call func(context.Context, int) (T, error)) attempt[T] {
	first := int(cl.cur.Load())
	second := cl.nextLive(first)
	if second < 0 {
		second = (first + 1) % len(cl.cs) // marked hung since do looked
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan attempt[T], 2)
	launch := func(idx int) {
		go func() { results <- try(cl, hctx, idx, o, call) }()
	}
	launch(first)
	timer := time.NewTimer(o.hedge)
	defer timer.Stop()
	pending, launched := 1, false
	var last attempt[T]
	for pending > 0 {
		select {
		case <-timer.C:
			if !launched {
				launched, pending = true, pending+1
				cl.hedged.Add(1)
				launch(second)
			}
		case a := <-results:
			pending--
			if a.err == nil {
				if a.idx != first {
					cl.hedgeWon.Add(1)
					cl.moveOff(first, errSlowReplica)
				}
				return a
			}
			last = a
			if ctx.Err() != nil || !replicaFailed(a.err) {
				return a
			}
			if a.idx == first {
				cl.moveOff(first, a.err)
				if !launched {
					launched, pending = true, pending+1
					launch(second)
				}
			}
		}
	}
	return last
}

// watched says whether an attempt with this deadline is watched: every
// call, not only the claim long-poll, whose deadline is longer than two
// liveness intervals, when there is another replica to move to. A node
// whose slots are all busy asks for work only through the claim its next
// result carries, whose deadline is half the lease left (half a minute at
// the default lease): unwatched, a hung replica holding that result
// stalled the node's leasing for as long.
func (cl *client) watched(deadline time.Duration) bool {
	return cl.liveEvery > 0 && len(cl.cs) > 1 && deadline > 2*cl.liveEvery
}

// watch asks replica idx whether it lives every interval while ctx (one
// attempt on it) lasts, each check bounded by the interval, and ends the
// attempt with errNotAlive at the first check without an answer: a
// replica that cannot answer a request that does nothing is stopped, not
// busy (a long-poll's own answer may rightly take its whole wait). The
// client then moves to the next replica that is not hung at once
// (moveOff), keeping the session, which also abandons every other call
// still waiting there (a download's stream, a heartbeat), not only this
// attempt.
func (cl *client) watch(ctx context.Context, idx int, every time.Duration, end context.CancelCauseFunc) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := cl.alive(ctx, idx, every); err != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w: %v", errNotAlive, err)
			// With nowhere to go (every other replica is hung) the call
			// goes on waiting here: ending it would only repeat it here.
			if cl.moveOff(idx, err) || cl.cur.Load() != int32(idx) {
				end(err)
				return
			}
		}
	}
}

// alive sends one liveness check (contracts.LivenessPath) to replica idx:
// any HTTP answer within d proves it lives, whatever its status (an older
// replica answers 404; a replica whose database is down still answers).
func (cl *client) alive(ctx context.Context, idx int, d time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, cl.bases[idx]+contracts.LivenessPath, nil)
	if err != nil {
		return err
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return err
	}
	cl.liveChecks.Add(1)
	// Read (a few bytes at most) so the connection is kept for the next one.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return resp.Body.Close()
}
