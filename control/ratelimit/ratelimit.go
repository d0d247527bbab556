// Package ratelimit owns the business API's request budget: one token
// bucket (golang.org/x/time/rate) per business token, with the token's own
// rate and burst or the replica's default. Buckets live in the memory of
// one replica: N replicas allow N× a token's rate (docs/operations.md,
// "Rate limits", says why and what sharing through the database costs).
// The package knows nothing of HTTP or the store; control/httpapi consults
// it on business routes only, and the store keeps each token's setting.
package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults and bounds of a Limit.
const (
	// RateDefault and BurstDefault are a business token's budget when
	// neither the token nor the server names one: far above what a
	// well-behaved backend sends (it waits on long-polls and webhooks), far
	// below what a loop takes from a replica.
	RateDefault  = 50
	BurstDefault = 100
	// RateMax and BurstMax bound a setting; above them, say 0 (unlimited).
	RateMax  = 1_000_000
	BurstMax = 1_000_000
	// sweepInterval is how often idle buckets are dropped.
	sweepInterval = time.Minute
)

// Limit is one bucket's setting.
type Limit struct {
	// Rate is how many requests per second refill the bucket; 0 means
	// unlimited (and then Burst must be 0).
	Rate float64 `json:"rate"`
	// Burst is the bucket's size: how many requests may come at once.
	Burst int `json:"burst"`
}

// Unlimited reports whether the limit lets every request through.
func (l Limit) Unlimited() bool { return l.Rate == 0 }

func (l Limit) String() string {
	if l.Unlimited() {
		return "unlimited"
	}
	return fmt.Sprintf("%g/s burst %d", l.Rate, l.Burst)
}

// FieldError is a refused Limit, naming the field ("rate" or "burst").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate refuses a nonsensical limit, every problem at once; each is a
// *FieldError.
func (l Limit) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if math.IsNaN(l.Rate) || l.Rate < 0 || l.Rate > RateMax {
		bad("rate", "%g must be 0 (unlimited) or requests per second up to %d", l.Rate, RateMax)
	}
	switch {
	case l.Burst < 0 || l.Burst > BurstMax:
		bad("burst", "%d must be 0..%d", l.Burst, BurstMax)
	case l.Rate > 0 && l.Burst == 0:
		bad("burst", "0 with rate %g would refuse every request: set a burst of at least 1", l.Rate)
	case l.Rate == 0 && l.Burst != 0:
		bad("burst", "%d with rate 0 (unlimited) means nothing: set burst 0, or a rate", l.Burst)
	}
	return errors.Join(errs...)
}

// Config sets up Buckets.
type Config struct {
	// Default is the limit of a token that names none; the zero Limit is
	// unlimited (kece-control serve sets RateDefault and BurstDefault).
	Default Limit
	// Now is the clock; nil is time.Now (tests pass a fake one).
	Now func() time.Time
}

// Validate refuses a nonsensical default, every problem at once.
func (c Config) Validate() error {
	if err := c.Default.Validate(); err != nil {
		return fmt.Errorf("rate limit default: %w", err)
	}
	return nil
}

// Buckets holds one replica's token buckets, keyed by business token id.
// It is safe for concurrent use.
type Buckets struct {
	def Limit
	now func() time.Time

	mu        sync.Mutex
	buckets   map[int64]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	set  Limit
	used time.Time
}

// New builds the buckets of one replica.
func New(cfg Config) (*Buckets, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Buckets{def: cfg.Default, now: now, buckets: make(map[int64]*bucket), lastSweep: now()}, nil
}

// Allow takes one request from the token's bucket. own is the token's own
// limit (nil: the default); a changed limit applies from this request on,
// with a full bucket (an operator who raises a token's limit lets it
// through at once). When the bucket is empty the request is
// not counted and retryAfter says when one will be there.
func (b *Buckets) Allow(token int64, own *Limit) (ok bool, retryAfter time.Duration) {
	set := b.def
	if own != nil {
		set = *own
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep(now)
	if set.Unlimited() {
		delete(b.buckets, token)
		return true, 0
	}
	bk := b.buckets[token]
	if bk == nil || bk.set != set {
		bk = &bucket{lim: rate.NewLimiter(rate.Limit(set.Rate), set.Burst), set: set}
		b.buckets[token] = bk
	}
	bk.used = now
	if have := bk.lim.TokensAt(now); have < 1 {
		return false, time.Duration(math.Ceil((1 - have) / set.Rate * float64(time.Second)))
	}
	bk.lim.AllowN(now, 1)
	return true, 0
}

// sweep drops, at most once per sweepInterval, the buckets that have been
// idle long enough to be full again: a fresh bucket is full too, so
// dropping them changes no answer and keeps the map to active tokens.
func (b *Buckets) sweep(now time.Time) {
	if now.Sub(b.lastSweep) < sweepInterval {
		return
	}
	b.lastSweep = now
	for id, bk := range b.buckets {
		refill := time.Duration(float64(bk.set.Burst) / bk.set.Rate * float64(time.Second))
		if now.Sub(bk.used) > refill {
			delete(b.buckets, id)
		}
	}
}

// Len is how many buckets are held (for tests of the sweep).
func (b *Buckets) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buckets)
}

// RetryAfterSeconds is a wait as the Retry-After header says it: whole
// seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
