package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

// APIError is a non-success answer of the control plane.
type APIError struct {
	Op         string
	Status     int
	Code       machineapi.ErrorCode
	Message    string
	RetryAfter time.Duration // 429 only
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

// client speaks the machine protocol through the generated client. The
// session token is swapped atomically when a session is (re)opened.
type client struct {
	base    string
	http    *http.Client
	token   atomic.Pointer[string]
	c       *machineapi.ClientWithResponses
	raw     *machineapi.Client
	timeout time.Duration
}

func newClient(base string, timeout time.Duration) (*client, error) {
	cl := &client{base: base, timeout: timeout,
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
	var err error
	if cl.c, err = machineapi.NewClientWithResponses(base, machineapi.WithHTTPClient(cl.http), auth); err != nil {
		return nil, fmt.Errorf("control client: %w", err)
	}
	if cl.raw, err = machineapi.NewClient(base, machineapi.WithHTTPClient(cl.http), auth); err != nil {
		return nil, fmt.Errorf("control client: %w", err)
	}
	return cl, nil
}

func (cl *client) close() { cl.http.CloseIdleConnections() }

func (cl *client) bounded(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cl.timeout+extra)
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
	ctx, cancel := cl.bounded(ctx, 0)
	defer cancel()
	req := machineapi.JoinRequest{JoinCode: code}
	if pool != "" {
		p := machineapi.Pool(pool)
		req.Pool = &p
	}
	r, err := cl.c.JoinNodeWithResponse(ctx, req, bearer(""))
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	if r.JSON201 == nil {
		return nil, apiError("join", r.HTTPResponse, r.Body)
	}
	return r.JSON201, nil
}

func (cl *client) openSession(ctx context.Context, credential, bootID string) (*machineapi.SessionResponse, error) {
	ctx, cancel := cl.bounded(ctx, 0)
	defer cancel()
	r, err := cl.c.OpenSessionWithResponse(ctx, machineapi.SessionRequest{BootId: bootID, ProtocolVersion: contracts.ProtocolVersion},
		bearer(credential))
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	if r.JSON200 == nil {
		return nil, apiError("open session", r.HTTPResponse, r.Body)
	}
	tok := r.JSON200.SessionToken
	cl.token.Store(&tok)
	return r.JSON200, nil
}

func (cl *client) heartbeat(ctx context.Context, req machineapi.HeartbeatRequest) (*machineapi.HeartbeatResponse, error) {
	ctx, cancel := cl.bounded(ctx, 0)
	defer cancel()
	r, err := cl.c.SendHeartbeatWithResponse(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if r.JSON200 == nil {
		return nil, apiError("heartbeat", r.HTTPResponse, r.Body)
	}
	return r.JSON200, nil
}

func (cl *client) claim(ctx context.Context, free int, wait time.Duration) ([]machineapi.ClaimedJob, error) {
	ctx, cancel := cl.bounded(ctx, wait)
	defer cancel()
	r, err := cl.c.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: int32(free), WaitMs: wait.Milliseconds()})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if r.JSON200 == nil {
		return nil, apiError("claim", r.HTTPResponse, r.Body)
	}
	return r.JSON200.Jobs, nil
}

func (cl *client) renew(ctx context.Context, leases []machineapi.LeaseProgress) ([]machineapi.LeaseAnswer, error) {
	ctx, cancel := cl.bounded(ctx, 0)
	defer cancel()
	r, err := cl.c.RenewLeasesWithResponse(ctx, machineapi.RenewRequest{Leases: leases})
	if err != nil {
		return nil, fmt.Errorf("renew: %w", err)
	}
	if r.JSON200 == nil {
		return nil, apiError("renew", r.HTTPResponse, r.Body)
	}
	return r.JSON200.Leases, nil
}

func (cl *client) submit(ctx context.Context, jobID string, req machineapi.ResultRequest) (*machineapi.ResultResponse, error) {
	ctx, cancel := cl.bounded(ctx, 0)
	defer cancel()
	r, err := cl.c.SubmitResultWithResponse(ctx, jobID, req)
	if err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	if r.JSON200 == nil {
		return nil, apiError("result", r.HTTPResponse, r.Body)
	}
	return r.JSON200, nil
}

// download opens an artifact body; the caller (the cache) reads and closes it.
// The body is streamed, never buffered whole.
func (cl *client) download(ctx context.Context, jobID, digest string, leaseEpoch int64) (io.ReadCloser, error) {
	resp, err := cl.raw.DownloadArtifact(ctx, jobID, digest, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: leaseEpoch})
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", digest, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, apiError("download "+digest[:12], resp, body)
	}
	return resp.Body, nil
}
