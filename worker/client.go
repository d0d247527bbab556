package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
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
	a := do(cl, ctx, callOpts{rp: repeatIfUnsent}, func(ctx context.Context, i int) (*machineapi.JoinResponse, error) {
		r, err := cl.cs[i].JoinNodeWithResponse(ctx, req, bearer(""))
		if err != nil {
			return nil, fmt.Errorf("join: %w", err)
		}
		if r.JSON201 == nil {
			return nil, apiError("join", r.HTTPResponse, r.Body)
		}
		return r.JSON201, nil
	})
	return a.v, a.err
}

func (cl *client) openSession(ctx context.Context, credential, bootID string) (*machineapi.SessionResponse, error) {
	// The same boot id returns the same session: safe on any replica.
	a := do(cl, ctx, callOpts{rp: repeatAlways}, func(ctx context.Context, i int) (*machineapi.SessionResponse, error) {
		r, err := cl.cs[i].OpenSessionWithResponse(ctx, machineapi.SessionRequest{BootId: bootID, ProtocolVersion: contracts.ProtocolVersion},
			bearer(credential))
		if err != nil {
			return nil, fmt.Errorf("open session: %w", err)
		}
		if r.JSON200 == nil {
			return nil, apiError("open session", r.HTTPResponse, r.Body)
		}
		return r.JSON200, nil
	})
	if a.err != nil {
		return nil, a.err
	}
	tok := a.v.SessionToken
	cl.token.Store(&tok)
	return a.v, nil
}

// heartbeatDeadlineMin is the shortest deadline a heartbeat attempt gets,
// however short its interval: a loaded but healthy replica must not look
// hung.
const heartbeatDeadlineMin = time.Second

// heartbeat reports; each attempt's deadline is its interval (the next
// heartbeat is due then anyway; at least heartbeatDeadlineMin, at most the
// request timeout), so a heartbeat is what notices a hung replica first
// while nothing else is in flight.
func (cl *client) heartbeat(ctx context.Context, req machineapi.HeartbeatRequest, every time.Duration) (*machineapi.HeartbeatResponse, error) {
	a := do(cl, ctx, callOpts{fixed: min(cl.timeout, max(every, heartbeatDeadlineMin))}, func(ctx context.Context, i int) (*machineapi.HeartbeatResponse, error) {
		r, err := cl.cs[i].SendHeartbeatWithResponse(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("heartbeat: %w", err)
		}
		if r.JSON200 == nil {
			return nil, apiError("heartbeat", r.HTTPResponse, r.Body)
		}
		return r.JSON200, nil
	})
	return a.v, a.err
}

// claim long-polls; each attempt's deadline is the wait plus the claim
// slack, and while it waits its replica is asked every liveness interval
// whether it lives (watch, as for every long call), so a replica that
// hangs costs about one interval or two, at most the deadline, before the
// next one is asked. requestID makes it idempotent: the same id again
// (here on the next replica, or by the caller's retry) answers the leases
// the first try granted, so it is repeated like any idempotent call.
//
// got is when the answer was received: the leases it carries were granted
// by the replica that answered, at most the answer's transit before then
// (the safety margin covers that), so their local deadlines count from it
// and never from when an earlier try went to another replica.
func (cl *client) claim(ctx context.Context, free int, wait time.Duration, requestID string) (jobs []machineapi.ClaimedJob, got time.Time, err error) {
	a := do(cl, ctx, callOpts{rp: repeatAlways, fixed: wait + cl.claimSlack}, func(ctx context.Context, i int) ([]machineapi.ClaimedJob, error) {
		r, err := cl.cs[i].ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: int32(free), WaitMs: wait.Milliseconds(),
			RequestId: &requestID})
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		if r.JSON200 == nil {
			return nil, apiError("claim", r.HTTPResponse, r.Body)
		}
		return r.JSON200.Jobs, nil
	})
	return a.v, a.got, a.err
}

// renewHedgeMax bounds how long a renew waits for its replica before the
// same renew also goes to the next one.
const renewHedgeMax = 2 * time.Second

// renew renews leases whose earliest local deadline is by: each attempt
// gets half the time left before it, and a renew not answered within a
// quarter of that (at most renewHedgeMax) is also sent to the next replica
// (hedged). sent is when the answered try was sent: the leases' new local
// deadlines count from it (that replica answered about them after it).
func (cl *client) renew(ctx context.Context, leases []machineapi.LeaseProgress, by time.Time) ([]machineapi.LeaseAnswer, time.Time, error) {
	o := callOpts{by: by}
	o.hedge = min(renewHedgeMax, max(minAttempt, cl.attemptTimeout(o)/4))
	a := do(cl, ctx, o, func(ctx context.Context, i int) ([]machineapi.LeaseAnswer, error) {
		r, err := cl.cs[i].RenewLeasesWithResponse(ctx, machineapi.RenewRequest{Leases: leases})
		if err != nil {
			return nil, fmt.Errorf("renew: %w", err)
		}
		if r.JSON200 == nil {
			return nil, apiError("renew", r.HTTPResponse, r.Body)
		}
		return r.JSON200.Leases, nil
	})
	return a.v, a.sent, a.err
}

// release gives leases back; repeating it answers RELEASED again. Its
// attempts share what is left of ctx's deadline.
func (cl *client) release(ctx context.Context, req machineapi.ReleaseRequest) ([]machineapi.ReleaseAnswer, error) {
	var o callOpts
	if d, ok := ctx.Deadline(); ok {
		o.by = d
	}
	a := do(cl, ctx, o, func(ctx context.Context, i int) ([]machineapi.ReleaseAnswer, error) {
		r, err := cl.cs[i].ReleaseLeasesWithResponse(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		if r.JSON200 == nil {
			return nil, apiError("release", r.HTTPResponse, r.Body)
		}
		return r.JSON200.Leases, nil
	})
	return a.v, a.err
}

// submit posts a result for a lease whose local deadline is by: each attempt
// gets half the time left before it, so the next replica can still be
// tried. sent is when the answered try was sent (leases a slot-cycle claim
// brought count from it).
func (cl *client) submit(ctx context.Context, jobID string, req machineapi.ResultRequest, by time.Time) (*machineapi.ResultResponse, time.Time, error) {
	// The same result again is ALREADY_COMMITTED: safe on any replica.
	a := do(cl, ctx, callOpts{by: by}, func(ctx context.Context, i int) (*machineapi.ResultResponse, error) {
		r, err := cl.cs[i].SubmitResultWithResponse(ctx, jobID, req)
		if err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		if r.JSON200 == nil {
			return nil, apiError("result", r.HTTPResponse, r.Body)
		}
		return r.JSON200, nil
	})
	return a.v, a.sent, a.err
}

// download opens an artifact body; the caller (the cache) reads and closes it.
// The body is streamed, never buffered whole.
//
// The answer must start within the request timeout, and the body must keep
// moving: a read that waits longer than the request timeout for the next
// bytes fails (stalledBody), so a replica that hangs mid-stream costs at most
// that before the caller retries (on the next replica).
func (cl *client) download(ctx context.Context, jobID, digest string, leaseEpoch int64) (io.ReadCloser, error) {
	a := do(cl, ctx, callOpts{}, func(_ context.Context, i int) (io.ReadCloser, error) {
		// The call's deadline covers the answer's start only: the stream
		// gets a context of its own, cancelled when it stalls or is closed.
		sctx, cancel := context.WithCancelCause(ctx)
		started := time.AfterFunc(cl.timeout, func() { cancel(errStalled) })
		// A move off this replica (it hung on another call) ends the
		// stream too; the retry goes to the replica now in use.
		off := cl.offSignal(i)
		go func() {
			select {
			case <-off:
				cancel(errAbandoned)
			case <-sctx.Done():
			}
		}()
		resp, err := cl.raws[i].DownloadArtifact(sctx, jobID, digest, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: leaseEpoch})
		started.Stop()
		if err != nil {
			if errors.Is(context.Cause(sctx), errStalled) {
				err = errStalled
			}
			cancel(nil)
			return nil, fmt.Errorf("download %s: %w", digest, err)
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			cancel(nil)
			return nil, apiError("download "+digest[:12], resp, body)
		}
		return &stalledBody{ReadCloser: resp.Body, ctx: sctx, idle: cl.timeout, cancel: cancel,
			timer: time.AfterFunc(cl.timeout, func() {
				cancel(errStalled)
				// The retry goes to the next replica.
				cl.moveOff(i, errStalled)
			})}, nil
	})
	return a.v, a.err
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
	if cause := context.Cause(b.ctx); err != nil && !errors.Is(err, io.EOF) && (errors.Is(cause, errStalled) || errors.Is(cause, errAbandoned)) {
		err = fmt.Errorf("%w (%v)", cause, err)
	}
	return n, err
}

func (b *stalledBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
