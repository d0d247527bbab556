package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/kece-oj/kece/control/ratelimit"
)

// RateLimiter is what the business surface consults once per
// authenticated request (Deps.RateLimiter: the replica's
// control/ratelimit.Buckets): whether the token may make one more request
// now, given the token's own limit (nil: the limiter's default), and if
// not, how long until it may.
// Nodes' routes (claims, renewals, results), the admin API, the console
// and unauthenticated business paths never consult it.
type RateLimiter interface {
	Allow(token int64, own *ratelimit.Limit) (ok bool, retryAfter time.Duration)
}

// rateLimited answers 429 RATE_LIMITED with Retry-After (whole seconds,
// rounded up) when the caller's business token is over its budget. It runs
// after tokenAuth and before the body is read or validated, so a refused
// request costs one token lookup.
func (s *Server) rateLimited(next http.Handler) http.Handler {
	if s.limiter == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := tokenFrom(r.Context())
		if tok.ID == 0 {
			// A public path: no token to charge.
			next.ServeHTTP(w, r)
			return
		}
		ok, wait := s.limiter.Allow(tok.ID, tok.RateLimit)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		secs := ratelimit.RetryAfterSeconds(wait)
		e := apiErr(http.StatusTooManyRequests, codeRateLimited,
			fmt.Errorf("business token %q is over its rate limit; retry in %d s", tok.Name, secs))
		e.RetryAfter = secs
		writeError(w, r, s.log, e, surfaceBusiness)
	})
}
