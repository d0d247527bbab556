package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/control/outage"
	"github.com/kece-oj/kece/control/store"
)

// Error is an API error with its HTTP status and machine code. Handlers
// return it (or any error) as the error result; writeError is the one place
// that turns errors into responses.
type Error struct {
	Status     int
	Code       string
	Message    string
	Details    map[string]any
	RetryAfter int // seconds, for 429/503
	cause      error
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// apiErr builds an Error with an explicit status and code.
func apiErr(status int, code string, cause error) *Error {
	msg := http.StatusText(status)
	if cause != nil {
		msg = cause.Error()
	}
	return &Error{Status: status, Code: code, Message: msg, cause: cause}
}

// surface names which API answered, for codes that differ by surface.
type surface int

const (
	surfaceMachine surface = iota
	surfaceAdmin
	surfaceBusiness
)

// classify maps an error class to status and code. Specific codes chosen by a
// handler (*Error) win; store classes map here and nowhere else.
func classify(err error, sf surface) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ve *store.ValidationError
	var mm *artifact.MismatchError
	err = store.Classify(err)
	switch {
	case errors.As(err, &ve):
		code := codeRequestInvalid
		if sf == surfaceMachine {
			code = codeResultInvalid
		}
		e := apiErr(http.StatusUnprocessableEntity, code, err)
		e.Details = map[string]any{"field": ve.Field}
		return e
	case errors.Is(err, store.ErrValidation):
		return apiErr(http.StatusUnprocessableEntity, codeRequestInvalid, err)
	case errors.Is(err, artifact.ErrTooLarge):
		return apiErr(http.StatusRequestEntityTooLarge, codePayloadTooLarge, err)
	case errors.Is(err, artifact.ErrSizeMismatch):
		return apiErr(http.StatusUnprocessableEntity, codeArtifactSizeMismatch, err)
	case errors.As(err, &mm):
		return apiErr(http.StatusUnprocessableEntity, codeDigestMismatch, err)
	case errors.Is(err, artifact.ErrInvalid):
		return apiErr(http.StatusBadRequest, codeRequestInvalid, err)
	case errors.Is(err, store.ErrNotFound):
		return apiErr(http.StatusNotFound, codeNotFound, err)
	case errors.Is(err, store.ErrLeaseLost):
		return apiErr(http.StatusConflict, codeLeaseLost, err)
	case errors.Is(err, store.ErrResultConflict):
		return apiErr(http.StatusConflict, codeResultConflict, err)
	case errors.Is(err, store.ErrJobCancelled):
		return apiErr(http.StatusConflict, codeJobCancelled, err)
	case errors.Is(err, store.ErrSuperseded):
		return apiErr(http.StatusConflict, codeSuperseded, err)
	case errors.Is(err, store.ErrArtifactNotInManifest):
		return apiErr(http.StatusForbidden, codeArtifactNotInManifest, err)
	case errors.Is(err, store.ErrConflict):
		code := codeStateConflict
		if sf == surfaceBusiness {
			code = codeSubmissionConflict
		}
		return apiErr(http.StatusConflict, code, err)
	case errors.Is(err, store.ErrSessionSuperseded):
		return apiErr(http.StatusUnauthorized, codeSessionSuperseded, err)
	case errors.Is(err, store.ErrNodeRevoked):
		return apiErr(http.StatusForbidden, codeNodeRevoked, err)
	case errors.Is(err, store.ErrJoinCodeExpired):
		return apiErr(http.StatusGone, codeJoinCodeExpired, err)
	case errors.Is(err, store.ErrJoinCodeUsed):
		return apiErr(http.StatusGone, codeJoinCodeUsed, err)
	case errors.Is(err, store.ErrTokenExpired) && sf != surfaceMachine:
		// The caller's token existed but its time is over: say so, so the
		// operator rotates instead of hunting a typo.
		return apiErr(http.StatusUnauthorized, codeTokenExpired, err)
	case errors.Is(err, store.ErrUnauthenticated):
		code := codeUnauthenticated
		if sf == surfaceMachine {
			code = codeSessionInvalid
		}
		return apiErr(http.StatusUnauthorized, code, err)
	case errors.Is(err, context.Canceled):
		return &Error{Status: 499, Code: codeCancelled, Message: "request cancelled", cause: err}
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Message: "database unavailable; retry", cause: err, RetryAfter: 1}
	}
	// ErrDatabase (a refused statement) and anything unknown: our bug.
	return &Error{Status: http.StatusInternalServerError, Code: codeInternal, Message: "internal error", cause: err}
}

type outageKey struct{}

func outageFrom(ctx context.Context) *outage.Tracker {
	t, _ := ctx.Value(outageKey{}).(*outage.Tracker)
	return t
}

// writeError writes the JSON error body. 5xx causes are logged, never sent.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, sf surface) {
	e := classify(err, sf)
	if bodyTimedOut(r.Context()) {
		// Whichever layer read the body (validator, decoder, upload) saw
		// its deadline pass: say so, and drop the connection.
		e = apiErr(http.StatusRequestTimeout, codeRequestTimeout, errors.New("the request body did not arrive in time"))
		w.Header().Set("Connection", "close")
	}
	noteError(r.Context(), e.Code)
	switch {
	case e.Code == codeUnavailable:
		// An outage is logged once by the replica's tracker, not per request.
		if t := outageFrom(r.Context()); t == nil || !t.Failed(r.Method+" "+r.URL.Path, err) {
			log.WarnContext(r.Context(), "request answered 503", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
		}
	case e.Status >= 500:
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	body := map[string]any{"code": e.Code, "message": e.Message}
	if e.Details != nil {
		body["details"] = e.Details
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(body)
}
