package contracts_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	nethttpmiddleware "github.com/oapi-codegen/nethttp-middleware"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// This file shows, and checks, how the generated pieces fit together: each
// surface's strict handler is registered on its own *http.ServeMux, wrapped
// in request validation against its embedded spec, and mounted on one root
// mux by path prefix. Generated clients then talk to it over loopback.

const testSession = "ks1_test-session-token-000000000000"

// fakeMachine answers every machine call from the fixed samples.
type fakeMachine struct {
	t        *testing.T
	artifact []byte
}

func sampleAs[T any](t *testing.T, file string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(readSample(t, file), &v))
	return v
}

func (f fakeMachine) JoinNode(_ context.Context, req machineapi.JoinNodeRequestObject) (machineapi.JoinNodeResponseObject, error) {
	if req.Body.JoinCode == "kj1-used-used-used" {
		return machineapi.JoinNode410JSONResponse{GoneJSONResponse: machineapi.GoneJSONResponse(sampleAs[machineapi.Error](f.t, "machine/error-410.json"))}, nil
	}
	return machineapi.JoinNode201JSONResponse(sampleAs[machineapi.JoinResponse](f.t, "machine/join-response.json")), nil
}

func (f fakeMachine) OpenSession(context.Context, machineapi.OpenSessionRequestObject) (machineapi.OpenSessionResponseObject, error) {
	return machineapi.OpenSession200JSONResponse(sampleAs[machineapi.SessionResponse](f.t, "machine/session-response.json")), nil
}

func (f fakeMachine) SendHeartbeat(context.Context, machineapi.SendHeartbeatRequestObject) (machineapi.SendHeartbeatResponseObject, error) {
	return machineapi.SendHeartbeat200JSONResponse(sampleAs[machineapi.HeartbeatResponse](f.t, "machine/heartbeat-response.json")), nil
}

func (f fakeMachine) ClaimJobs(context.Context, machineapi.ClaimJobsRequestObject) (machineapi.ClaimJobsResponseObject, error) {
	return machineapi.ClaimJobs429JSONResponse{TooManyRequestsJSONResponse: machineapi.TooManyRequestsJSONResponse{
		Body:    sampleAs[machineapi.Error](f.t, "machine/error-429.json"),
		Headers: machineapi.TooManyRequestsResponseHeaders{RetryAfter: 2},
	}}, nil
}

func (f fakeMachine) RenewLeases(context.Context, machineapi.RenewLeasesRequestObject) (machineapi.RenewLeasesResponseObject, error) {
	return machineapi.RenewLeases200JSONResponse(sampleAs[machineapi.RenewResponse](f.t, "machine/renew-response.json")), nil
}

func (f fakeMachine) ReleaseLeases(context.Context, machineapi.ReleaseLeasesRequestObject) (machineapi.ReleaseLeasesResponseObject, error) {
	return machineapi.ReleaseLeases200JSONResponse(sampleAs[machineapi.ReleaseResponse](f.t, "machine/release-response.json")), nil
}

func (f fakeMachine) DownloadArtifact(_ context.Context, req machineapi.DownloadArtifactRequestObject) (machineapi.DownloadArtifactResponseObject, error) {
	if req.Params.XKeceLeaseEpoch != 2 {
		return machineapi.DownloadArtifact409JSONResponse{ConflictJSONResponse: machineapi.ConflictJSONResponse(sampleAs[machineapi.Error](f.t, "machine/error-409.json"))}, nil
	}
	return machineapi.DownloadArtifact200ApplicationoctetStreamResponse{
		Body:          bytes.NewReader(f.artifact),
		ContentLength: int64(len(f.artifact)),
		Headers:       machineapi.DownloadArtifact200ResponseHeaders{XKeceSha256: req.Sha256},
	}, nil
}

func (f fakeMachine) SubmitResult(_ context.Context, req machineapi.SubmitResultRequestObject) (machineapi.SubmitResultResponseObject, error) {
	if req.Body.Outcome == machineapi.OutcomeError {
		return nil, errors.New("boom") // exercises ResponseErrorHandlerFunc
	}
	return machineapi.SubmitResult200JSONResponse(sampleAs[machineapi.ResultResponse](f.t, "machine/result-response-accepted.json")), nil
}

// summaryOnly serves the public summary and enqueue; the other business
// operations are not called in these tests (the embedded nil interface would
// panic).
type summaryOnly struct {
	businessapi.StrictServerInterface
	t *testing.T
}

func (s summaryOnly) GetJudgersSummary(context.Context, businessapi.GetJudgersSummaryRequestObject) (businessapi.GetJudgersSummaryResponseObject, error) {
	return businessapi.GetJudgersSummary200JSONResponse(sampleAs[businessapi.JudgersSummary](s.t, "business/judgers-summary.json")), nil
}

func (s summaryOnly) EnqueueSubmission(context.Context, businessapi.EnqueueSubmissionRequestObject) (businessapi.EnqueueSubmissionResponseObject, error) {
	return businessapi.EnqueueSubmission202JSONResponse(sampleAs[businessapi.SubmissionAccepted](s.t, "business/submission-accepted.json")), nil
}

// writeError is the one place that turns a status and code into an Error body.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": code, "message": message})
}

// validated wraps h in request validation against spec. Authentication is
// done by the application's own middleware (it must put the identity in the
// context, which the validator cannot), so here the validator only insists
// that a bearer token is present where the spec requires one.
func validated(t *testing.T, getSpec func() (*openapi3.T, error), h http.Handler) http.Handler {
	t.Helper()
	spec, err := getSpec()
	require.NoError(t, err)
	return nethttpmiddleware.OapiRequestValidatorWithOptions(spec, &nethttpmiddleware.Options{
		Options: openapi3filter.Options{
			AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
				if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
					return errors.New("bearer token required")
				}
				return nil
			},
		},
		ErrorHandlerWithOpts: func(_ context.Context, err error, w http.ResponseWriter, _ *http.Request, o nethttpmiddleware.ErrorHandlerOpts) {
			code := "REQUEST_INVALID"
			switch o.StatusCode {
			case http.StatusUnauthorized:
				code = "SESSION_INVALID"
			case http.StatusNotFound:
				code = "NOT_FOUND"
			}
			writeError(w, o.StatusCode, code, err.Error())
		},
	})(h)
}

func newTestServer(t *testing.T, m machineapi.StrictServerInterface) *httptest.Server {
	t.Helper()
	strictOpts := machineapi.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, http.StatusBadRequest, "REQUEST_INVALID", err.Error())
		},
		ResponseErrorHandlerFunc: func(w http.ResponseWriter, _ *http.Request, _ error) {
			writeError(w, http.StatusInternalServerError, "INTERNAL", "internal error")
		},
	}
	machineMux := http.NewServeMux()
	machineapi.HandlerFromMux(machineapi.NewStrictHandlerWithOptions(m, nil, strictOpts), machineMux)

	// The admin and business surfaces are mounted the same way; their
	// handlers are not under test here, only that the routes coexist.
	adminMux := http.NewServeMux()
	adminapi.HandlerFromMux(adminapi.NewStrictHandler(nil, nil), adminMux)
	businessMux := http.NewServeMux()
	businessapi.HandlerFromMux(businessapi.NewStrictHandler(summaryOnly{t: t}, nil), businessMux)

	root := http.NewServeMux()
	root.Handle("/api/v1/internal/judgers/", validated(t, machineapi.GetSpec, machineMux))
	root.Handle("/api/v1/admin/", validated(t, adminapi.GetSpec, adminMux))
	root.Handle("/api/v1/", validated(t, businessapi.GetSpec, businessMux))

	srv := httptest.NewServer(root) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv
}

func TestGeneratedServerAndClientFit(t *testing.T) {
	t.Parallel()
	artifact := []byte("1 2\n")
	srv := newTestServer(t, fakeMachine{t: t, artifact: artifact})
	ctx := context.Background()

	bearer := func(token string) machineapi.ClientOption {
		return machineapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			return nil
		})
	}
	anon, err := machineapi.NewClientWithResponses(srv.URL)
	require.NoError(t, err)
	node, err := machineapi.NewClientWithResponses(srv.URL, bearer(testSession))
	require.NoError(t, err)

	t.Run("join needs no token and returns 201", func(t *testing.T) {
		res, err := anon.JoinNodeWithResponse(ctx, sampleAs[machineapi.JoinRequest](t, "machine/join-request.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, res.StatusCode())
		require.Equal(t, sampleAs[machineapi.JoinResponse](t, "machine/join-response.json"), *res.JSON201)
	})
	t.Run("used join code is 410 with its code", func(t *testing.T) {
		res, err := anon.JoinNodeWithResponse(ctx, machineapi.JoinRequest{JoinCode: "kj1-used-used-used"})
		require.NoError(t, err)
		require.Equal(t, http.StatusGone, res.StatusCode())
		require.Equal(t, machineapi.ErrorCodeJoinCodeUsed, res.JSON410.Code)
	})
	t.Run("session without a token is refused before the handler", func(t *testing.T) {
		res, err := anon.OpenSessionWithResponse(ctx, sampleAs[machineapi.SessionRequest](t, "machine/session-request.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, res.StatusCode())
		require.NotNil(t, res.JSON401)
	})
	t.Run("heartbeat round trip", func(t *testing.T) {
		res, err := node.SendHeartbeatWithResponse(ctx, sampleAs[machineapi.HeartbeatRequest](t, "machine/heartbeat-request.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode())
		require.Equal(t, machineapi.DesiredStateDraining, res.JSON200.DesiredState)
	})
	t.Run("out-of-range claim is refused by validation", func(t *testing.T) {
		res, err := node.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 65, WaitMs: 1000})
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, res.StatusCode())
		require.Equal(t, machineapi.ErrorCodeRequestInvalid, res.JSON400.Code)
	})
	t.Run("429 carries Retry-After", func(t *testing.T) {
		res, err := node.ClaimJobsWithResponse(ctx, sampleAs[machineapi.ClaimRequest](t, "machine/claim-request.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode())
		require.Equal(t, "2", res.HTTPResponse.Header.Get("Retry-After"))
		require.Equal(t, machineapi.ErrorCodeRateLimited, res.JSON429.Code)
	})
	t.Run("renew answers per lease", func(t *testing.T) {
		res, err := node.RenewLeasesWithResponse(ctx, sampleAs[machineapi.RenewRequest](t, "machine/renew-request.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode())
		require.Len(t, res.JSON200.Leases, 3)
	})
	t.Run("release answers per lease", func(t *testing.T) {
		res, err := node.ReleaseLeasesWithResponse(ctx, sampleAs[machineapi.ReleaseRequest](t, "machine/release-request.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode())
		require.Equal(t, []machineapi.ReleaseState{machineapi.ReleaseStateReleased, machineapi.ReleaseStateLost},
			[]machineapi.ReleaseState{res.JSON200.Leases[0].State, res.JSON200.Leases[1].State})
	})
	t.Run("artifact streams with digest header", func(t *testing.T) {
		sum := sha256.Sum256(artifact)
		digest := hex.EncodeToString(sum[:])
		// The plain client returns the *http.Response so the body can be
		// streamed to disk; ClientWithResponses would buffer it.
		resp, err := node.ClientInterface.(*machineapi.Client).DownloadArtifact(ctx, "9007199254740993", digest, &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: 2})
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, digest, resp.Header.Get("X-Kece-Sha256"))
		require.Equal(t, int64(len(artifact)), resp.ContentLength)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, artifact, body)
	})
	t.Run("artifact with a stale epoch is 409", func(t *testing.T) {
		sum := sha256.Sum256(artifact)
		res, err := node.DownloadArtifactWithResponse(ctx, "9007199254740993", hex.EncodeToString(sum[:]), &machineapi.DownloadArtifactParams{XKeceLeaseEpoch: 1})
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, res.StatusCode())
		require.Equal(t, machineapi.ErrorCodeLeaseLost, res.JSON409.Code)
	})
	t.Run("bad job id in path is refused by validation", func(t *testing.T) {
		res, err := node.SubmitResultWithResponse(ctx, "0123", sampleAs[machineapi.ResultRequest](t, "machine/result-request-ac.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, res.StatusCode())
	})
	t.Run("result accepted", func(t *testing.T) {
		res, err := node.SubmitResultWithResponse(ctx, "9007199254740993", sampleAs[machineapi.ResultRequest](t, "machine/result-request-ac.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, res.StatusCode())
		require.Equal(t, machineapi.DispositionAccepted, res.JSON200.Disposition)
	})
	t.Run("handler error becomes a 500 Error body", func(t *testing.T) {
		res, err := node.SubmitResultWithResponse(ctx, "9007199254740993", sampleAs[machineapi.ResultRequest](t, "machine/result-request-error.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusInternalServerError, res.StatusCode())
		require.NotNil(t, res.JSONDefault)
		require.Equal(t, machineapi.ErrorCodeInternal, res.JSONDefault.Code)
	})
	t.Run("admin calls need a token", func(t *testing.T) {
		ac, err := adminapi.NewClientWithResponses(srv.URL)
		require.NoError(t, err)
		res, err := ac.ListJudgersWithResponse(ctx, &adminapi.ListJudgersParams{})
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, res.StatusCode())
	})
	t.Run("Idempotency-Key is checked by validation", func(t *testing.T) {
		bc, err := businessapi.NewClientWithResponses(srv.URL, businessapi.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer kb1_test")
			return nil
		}))
		require.NoError(t, err)
		key := "two words"
		res, err := bc.EnqueueSubmissionWithResponse(ctx, &businessapi.EnqueueSubmissionParams{IdempotencyKey: &key},
			sampleAs[businessapi.SubmissionCreate](t, "business/submission-create.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, res.StatusCode())
		require.Equal(t, businessapi.ErrorCodeRequestInvalid, res.JSON400.Code)

		key = "enqueue-7f3a9c"
		res, err = bc.EnqueueSubmissionWithResponse(ctx, &businessapi.EnqueueSubmissionParams{IdempotencyKey: &key},
			sampleAs[businessapi.SubmissionCreate](t, "business/submission-create.json"))
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, res.StatusCode())
		require.Equal(t, businessapi.SubmissionStatusCodePending, res.JSON202.Status)
	})
	t.Run("public summary needs no token; business calls do", func(t *testing.T) {
		bc, err := businessapi.NewClientWithResponses(srv.URL)
		require.NoError(t, err)
		res, err := bc.GetSubmissionWithResponse(ctx, "ALGO", "s-1", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, res.StatusCode())
		sres, err := bc.GetJudgersSummaryWithResponse(ctx)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, sres.StatusCode())
		require.Equal(t, sampleAs[businessapi.JudgersSummary](t, "business/judgers-summary.json"), *sres.JSON200)
	})
}
