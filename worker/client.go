package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// Error classes of control-plane calls; callers test them with errors.Is.
var (
	// ErrSuperseded: another process of this node opened a newer session.
	// The node stops and does not log in again.
	ErrSuperseded = errors.New("session superseded by another process of this node")
	// ErrRevoked: the node's credential was revoked or is no longer valid.
	ErrRevoked = errors.New("node credential revoked or invalid")
	// ErrJoinCodeSpent: the join code was used or expired.
	ErrJoinCodeSpent = errors.New("join code already used or expired; ask an admin for a new one")
	// ErrJoinCodeInvalid: the control plane does not know the join code.
	ErrJoinCodeInvalid = errors.New("join code unknown to the control plane")
	// ErrProtocolUnsupported: the control plane speaks another machine
	// protocol version; only another release of kece-node (or of the
	// control plane) helps, never a restart (docs/operations.md "Upgrades").
	ErrProtocolUnsupported = errors.New("the control plane speaks another machine protocol version; upgrade in the order docs/operations.md gives")
)

// APIError is a non-success answer of the control plane.
type APIError struct {
	Op         string
	Status     int
	Code       machineapi.ErrorCode
	Message    string
	RetryAfter time.Duration // 429 and 503
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s: %s", e.Op, e.Status, e.Code, e.Message)
}

// Is maps protocol answers to the node's error classes.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrSuperseded:
		return e.Code == machineapi.ErrorCodeSessionSuperseded
	case ErrRevoked:
		return e.Code == machineapi.ErrorCodeNodeRevoked || e.Code == machineapi.ErrorCodeCredentialInvalid
	case ErrJoinCodeSpent:
		return e.Status == http.StatusGone
	case ErrJoinCodeInvalid:
		return e.Code == machineapi.ErrorCodeJoinCodeInvalid
	case ErrPoolMismatch:
		return e.Code == machineapi.ErrorCodePoolMismatch
	case ErrProtocolUnsupported:
		return e.Code == machineapi.ErrorCodeProtocolUnsupported
	}
	return false
}

// retryable reports whether the same request may be sent again: network
// errors, 5xx and 429.
func retryable(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// fatal reports whether err means this process must stop for good.
func fatal(err error) bool { return errors.Is(err, ErrSuperseded) || errors.Is(err, ErrRevoked) }

// sessionInvalid: the session token is unknown (e.g. reissued); reopen with
// the same boot id.
func sessionInvalid(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == machineapi.ErrorCodeSessionInvalid
}

func apiError(op string, resp *http.Response, body []byte) error {
	e := &APIError{Op: op, Status: resp.StatusCode}
	var b machineapi.Error
	if json.Unmarshal(body, &b) == nil && b.Code != "" {
		e.Code, e.Message = b.Code, clip(b.Message, 512)
	} else {
		e.Message = clip(string(body), 256)
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return e
}

// client speaks the machine protocol through the generated client, to one
// of the control plane's replicas (KECE_CONTROL_URL may list several). The
// session token is swapped atomically when a session is (re)opened; it is
// valid on every replica (sessions live in the control database).
//
// Every call carries a deadline (the claim long-poll: its wait plus the
// request timeout). When a replica fails a call in a way another replica
// may not — no answer within the deadline, a network error, 502/503/504 —
// the client moves to the next replica for this and later calls, keeping
// the session; calls that are safe to repeat are repeated there at once,
// each replica tried once, before the caller backs off.
type client struct {
	bases   []string
	cur     atomic.Int32 // index of the replica in use
	http    *http.Client
	token   atomic.Pointer[string]
	cs      []*machineapi.ClientWithResponses
	raws    []*machineapi.Client
	timeout time.Duration
	// moved is told when the client moves to another replica (for a log
	// line); may be nil.
	moved func(from, to string, err error)
}

// newClient builds a client over one or more base URLs (ControlURLs).
func newClient(bases []string, timeout time.Duration) (*client, error) {
	if len(bases) == 0 {
		return nil, errors.New("control client: no control URL")
	}
	cl := &client{bases: bases, timeout: timeout,
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
	}
	return cl, nil
}

func (cl *client) close() { cl.http.CloseIdleConnections() }

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
	// same result payload).
	repeatAlways repeat = iota
	// repeatIfUnsent: the call is not idempotent (a join spends its code;
	// claims carry a request id and repeat always): only when it certainly
	// was not sent, or the replica answered 503 (it did nothing).
	repeatIfUnsent
)

// moveOff makes the replica after idx the one in use, unless another call
// moved already, and reports the move (with why) to moved.
func (cl *client) moveOff(idx int, why error) {
	next := (idx + 1) % len(cl.cs)
	if next != idx && cl.cur.CompareAndSwap(int32(idx), int32(next)) && cl.moved != nil {
		cl.moved(cl.bases[idx], cl.bases[next], why)
	}
}

// do runs call with its deadline (the request timeout plus extra) on the
// replica in use, moving on as the type comment says.
func (cl *client) do(ctx context.Context, extra time.Duration, rp repeat, call func(context.Context, int) error) error {
	n := len(cl.cs)
	first := int(cl.cur.Load())
	var err error
	for i := 0; i < n; i++ {
		idx := (first + i) % n
		cctx, cancel := context.WithTimeout(ctx, cl.timeout+extra)
		err = call(cctx, idx)
		cancel()
		if err == nil || ctx.Err() != nil || !replicaFailed(err) || n == 1 {
			return err
		}
		cl.moveOff(idx, err)
		var ae *APIError
		unsent := notSent(err) || (errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable)
		if rp == repeatIfUnsent && !unsent {
			return err
		}
	}
	return err
}

// bearer overrides the session token for one call (the credential on
// session, nothing on join).
func bearer(token string) machineapi.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		if token == "" {
			req.Header.Del("Authorization")
			return nil
		}
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// join exchanges a join code; pool names the pool of this process, so a
// code of another pool's node is refused without being spent.
func (cl *client) join(ctx context.Context, code, pool string) (*machineapi.JoinResponse, error) {
	req := machineapi.JoinRequest{JoinCode: code}
	if pool != "" {
		p := machineapi.Pool(pool)
		req.Pool = &p
	}
	var out *machineapi.JoinResponse
	err := cl.do(ctx, 0, repeatIfUnsent, func(ctx context.Context, i int) error {
		r, err := cl.cs[i].JoinNodeWithResponse(ctx, req, bearer(""))
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		if r.JSON201 == nil {
			return apiError("join", r.HTTPResponse, r.Body)
		}
		out = r.JSON201
		return nil
	})
	return out, err
}

func (cl *client) openSession(ctx context.Context, credential, bootID string) (*machineapi.SessionResponse, error) {
	var out *machineapi.SessionResponse
	// The same boot id returns the same session: safe on any replica.
	err := cl.do(ctx, 0, repeatAlways, func(ctx context.Context, i int) error {
		r, err := cl.cs[i].OpenSessionWithResponse(ctx, machineapi.SessionRequest{BootId: bootID, ProtocolVersion: contracts.ProtocolVersion},
			bearer(credential))
		if err != nil {
			return fmt.Errorf("open session: %w", err)
		}
		if r.JSON200 == nil {
			return apiError("open session", r.HTTPResponse, r.Body)
		}
		out = r.JSON200
		return nil
	})
	if err != nil {
		return nil, err
	}
	tok := out.SessionToken
	cl.token.Store(&tok)
	return out, nil
}

func (cl *client) heartbeat(ctx context.Context, req machineapi.HeartbeatRequest) (*machineapi.HeartbeatResponse, error) {
	var out *machineapi.HeartbeatResponse
	err := cl.do(ctx, 0, repeatAlways, func(ctx context.Context, i int) error {
		r, err := cl.cs[i].SendHeartbeatWithResponse(ctx, req)
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		if r.JSON200 == nil {
			return apiError("heartbeat", r.HTTPResponse, r.Body)
		}
		out = r.JSON200
		return nil
	})
	return out, err
}

// claim long-polls; its deadline is the wait plus the request timeout, so a
// replica that hangs costs at most that before the next one is asked.
// requestID makes it idempotent: the same id again (here on the next
// replica, or by the caller's retry) answers the leases the first try
// granted, so it is repeated like any idempotent call.
func (cl *client) claim(ctx context.Context, free int, wait time.Duration, requestID string) ([]machineapi.ClaimedJob, error) {
	var out []machineapi.ClaimedJob
	err := cl.do(ctx, wait, repeatAlways, func(ctx context.Context, i int) error {
		r, err := cl.cs[i].ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: int32(free), WaitMs: wait.Milliseconds(),
			RequestId: &requestID})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if r.JSON200 == nil {
			return apiError("claim", r.HTTPResponse, r.Body)
		}
		out = r.JSON200.Jobs
		return nil
	})
	return out, err
}

func (cl *client) renew(ctx context.Context, leases []machineapi.LeaseProgress) ([]machineapi.LeaseAnswer, error) {
	var out []machineapi.LeaseAnswer
	err := cl.do(ctx, 0, repeatAlways, func(ctx context.Context, i int) error {
		r, err := cl.cs[i].RenewLeasesWithResponse(ctx, machineapi.RenewRequest{Leases: leases})
		if err != nil {
			return fmt.Errorf("renew: %w", err)
		}
		if r.JSON200 == nil {
			return apiError("renew", r.HTTPResponse, r.Body)
		}
		out = r.JSON200.Leases
		return nil
	})
	return out, err
}

// release gives leases back; repeating it answers RELEASED again.
func (cl *client) release(ctx context.Context, req machineapi.ReleaseRequest) ([]machineapi.ReleaseAnswer, error) {
	var out []machineapi.ReleaseAnswer
	err := cl.do(ctx, 0, repeatAlways, func(ctx context.Context, i int) error {
		r, err := cl.cs[i].ReleaseLeasesWithResponse(ctx, req)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		if r.JSON200 == nil {
			return apiError("release", r.HTTPResponse, r.Body)
		}
		out = r.JSON200.Leases
		return nil
	})
	return out, err
}

func (cl *client) submit(ctx context.Context, jobID string, req machineapi.ResultRequest) (*machineapi.ResultResponse, error) {
	var out *machineapi.ResultResponse
	// The same result again is ALREADY_COMMITTED: safe on any replica.
	err := cl.do(ctx, 0, repeatAlways, func(ctx context.Context, i int) error {
		r, err := cl.cs[i].SubmitResultWithResponse(ctx, jobID, req)
		if err != nil {
			return fmt.Errorf("result: %w", err)
		}
		if r.JSON200 == nil {
			return apiError("result", r.HTTPResponse, r.Body)
		}
		out = r.JSON200
		return nil
	})
	return out, err
}

// download opens an artifact body; the caller (the cache) reads and closes it.
// The body is streamed, never buffered whole.
//
// The answer must start within the request timeout, and the body must keep
// moving: a read that waits longer than the request timeout for the next
// bytes fails (stalledBody), so a replica that hangs mid-stream costs at most
// that before the caller retries (on the next replica).
func (cl *client) download(ctx context.Context, jobID, digest string, leaseEpoch int64) (io.ReadCloser, error) {
	var out io.ReadCloser
	err := cl.do(ctx, 0, repeatAlways, func(_ context.Context, i int) error {
		// The call's deadline covers the answer's start only: the stream
		// gets a context of its own, cancelled when it stalls or is closed.
		sctx, cancel := context.WithCancelCause(ctx)
		started := time.AfterFunc(cl.timeout, func() { cancel(errStalled) })
		resp, err := cl.raws[i].DownloadArtifact(sctx, jobID, digest, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: leaseEpoch})
		started.Stop()
		if err != nil {
			if errors.Is(context.Cause(sctx), errStalled) {
				err = errStalled
			}
			cancel(nil)
			return fmt.Errorf("download %s: %w", digest, err)
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			cancel(nil)
			return apiError("download "+digest[:12], resp, body)
		}
		out = &stalledBody{ReadCloser: resp.Body, ctx: sctx, idle: cl.timeout, cancel: cancel,
			timer: time.AfterFunc(cl.timeout, func() {
				cancel(errStalled)
				// The retry goes to the next replica.
				cl.moveOff(i, errStalled)
			})}
		return nil
	})
	return out, err
}

// errStalled: a replica stopped sending within the request timeout. It is a
// replica failure (retried, on the next replica), not a cancellation.
var errStalled = errors.New("the control replica sent nothing within the request timeout")

// stalledBody cancels a download whose next bytes take longer than idle.
type stalledBody struct {
	io.ReadCloser
	ctx    context.Context
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

func (b *stalledBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.ReadCloser.Read(p)
	b.timer.Reset(b.idle)
	if err != nil && !errors.Is(err, io.EOF) && errors.Is(context.Cause(b.ctx), errStalled) {
		err = fmt.Errorf("%w (%v)", errStalled, err)
	}
	return n, err
}

func (b *stalledBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
