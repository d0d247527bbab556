package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kece-oj/kece/control/outage"
	"github.com/kece-oj/kece/control/store"
)

// Defaults for Config.
const (
	ConsumerDefault      = "webhook"
	BatchDefault         = 16
	TimeoutDefault       = 10 * time.Second
	MaxAttemptsDefault   = 8
	BackoffBaseDefault   = 2 * time.Second
	BackoffMaxDefault    = 10 * time.Minute
	PollIntervalDefault  = time.Second
	MinSecretBytes       = 16
	MaxSecrets           = 4
	maxResponseBytesRead = 4 << 10
)

// Header names of a delivery besides the Standard Webhooks ones
// (signature.go).
const (
	EventIDHeader = "X-Kece-Event-Id"
	AttemptHeader = "X-Kece-Delivery-Attempt"
)

// Config configures a Sender. Zero fields take their defaults (except URL
// and Secrets, which are required).
type Config struct {
	// URL receives a POST per event (http or https, absolute).
	URL string
	// Secrets sign every delivery (ParseSecrets): one signature per secret
	// in webhook-signature, so a receiver can move to a new secret while
	// the sender still lists the old one. At least one.
	Secrets []Secret
	// Consumer is the event consumer name the sender claims under.
	Consumer string
	// Group is the settlement-event consumer group the sender delivers
	// (docs/business.md "Tenancy"): every event of that group, of every type
	// the group takes. Empty means store.DefaultConsumerGroup, which takes
	// every settlement, as before groups existed.
	Group string
	// Batch is how many events one claim takes (1..100).
	Batch int
	// Concurrency is how many deliveries to URL may be in flight at once
	// (1..32, default 1: one batch at a time, delivered in order). The
	// deliveries share one hold when the receiver is down.
	Concurrency int
	// Timeout bounds one delivery: connect, send, and read the response.
	Timeout time.Duration
	// MaxAttempts is how many failed deliveries make an event DEAD.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the capped exponential retry delay.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// PollInterval is the pause after a claim that found nothing.
	PollInterval time.Duration
	// Observer, when set, is told the result of every delivery attempt
	// (delivered, failed, dead); control/metrics implements it.
	Observer DeliveryObserver
	// Outage, when set, is the replica's database outage tracker: a pass
	// that fails because the database is unreachable is logged there, once
	// per outage.
	Outage *outage.Tracker
}

// DeliveryObserver counts delivery attempts by result.
type DeliveryObserver interface {
	WebhookDelivery(result string)
}

func (s *Sender) observe(result string) {
	if s.cfg.Observer != nil {
		s.cfg.Observer.WebhookDelivery(result)
	}
}

func (c *Config) setDefaults() {
	c.Consumer = cmp.Or(c.Consumer, ConsumerDefault)
	c.Group = cmp.Or(c.Group, store.DefaultConsumerGroup)
	c.Batch = cmp.Or(c.Batch, BatchDefault)
	c.Concurrency = cmp.Or(c.Concurrency, 1)
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
}

// Validate refuses a missing or non-HTTP URL, a short secret and
// nonsensical timings, naming every problem at once. It applies defaults
// to a copy first.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("webhook config: "+format, a...)) }
	if err := ValidateURL(c.URL); err != nil {
		bad("%w", err)
	}
	switch {
	case len(c.Secrets) == 0:
		bad("a secret is required")
	case len(c.Secrets) > MaxSecrets:
		bad("at most %d secrets at once", MaxSecrets)
	case slices.ContainsFunc(c.Secrets, func(s Secret) bool { return len(s.key) < MinSecretBytes }):
		bad("every secret must be at least %d bytes (use ParseSecret)", MinSecretBytes)
	}
	if len(c.Consumer) > 128 {
		bad("consumer name is longer than 128")
	}
	if !store.ValidConsumerGroup(c.Group) {
		bad("consumer group %q must be lowercase letters, digits, . _ - (at most 64)", c.Group)
	}
	if c.Batch < 1 || c.Batch > 100 {
		bad("batch %d must be 1..100", c.Batch)
	}
	if c.Concurrency < 1 || c.Concurrency > 32 {
		bad("concurrency %d must be 1..32", c.Concurrency)
	}
	if c.Timeout < 10*time.Millisecond || c.Timeout > 5*time.Minute {
		bad("timeout %s must be 10ms..5m", c.Timeout)
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		bad("max attempts %d must be 1..100", c.MaxAttempts)
	}
	if c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase {
		bad("backoff base %s / max %s must be positive and base ≤ max", c.BackoffBase, c.BackoffMax)
	}
	if c.PollInterval < time.Millisecond {
		bad("poll interval %s is below 1ms", c.PollInterval)
	}
	return errors.Join(errs...)
}

// Sender delivers settlement events to the configured URL.
//
// Besides each event's own retry schedule, the sender backs off as a whole
// when the receiver says it is unavailable (503 or 429, honouring
// Retry-After) or cannot be reached (connection refused, reset, timed out):
// no delivery is sent to it until the hold passes, and the hold doubles
// (capped at BackoffMax, jittered) while the receiver stays down, so an
// outage costs one probe per hold, not one request per pending event. A pass
// that fails on the database backs off the same way.
type Sender struct {
	cfg    Config
	store  *store.Store
	client *http.Client
	log    *slog.Logger
	// target is where and with what deliveries go; SetTarget swaps it
	// without stopping the loops (a secret rotation, a new URL).
	target atomic.Pointer[target]

	// drained ends when Drain is called: Run stops claiming.
	drained context.Context
	Drain   context.CancelFunc

	// holdUntil: no delivery before it; downs: consecutive
	// receiver-unavailable answers. Shared by the delivery loops.
	mu        sync.Mutex
	holdUntil time.Time
	downs     int
}

type target struct {
	url     string
	secrets []Secret
}

// ValidateURL refuses what a webhook URL must not be: empty, relative,
// another scheme than http(s), or carrying credentials.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return errors.New("URL is required")
	case err != nil:
		return fmt.Errorf("URL: %w", err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("URL must be an absolute http(s) URL")
	case u.User != nil:
		return errors.New("URL must not carry credentials; deliveries are signed instead")
	}
	return nil
}

// SetTarget changes the URL and secrets of the following deliveries (both
// must be valid: ValidateURL, 1..MaxSecrets secrets).
func (s *Sender) SetTarget(url string, secrets []Secret) {
	s.target.Store(&target{url: url, secrets: slices.Clone(secrets)})
}

// hold is when deliveries may go again.
func (s *Sender) hold() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdUntil
}

// New returns a sender; it does nothing until Run.
func New(cfg Config, st *store.Store, log *slog.Logger) (*Sender, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	// A transport of its own: a receiver that hangs holds this sender's
	// connections only, never another group's.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, cfg.Concurrency)
	client := &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		// A redirect is a failed delivery: the signed body goes only to the
		// configured URL.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	s := &Sender{cfg: cfg, store: st, client: client, log: log.With("consumer", cfg.Consumer, "consumer_group", cfg.Group)}
	s.drained, s.Drain = context.WithCancel(context.Background())
	s.SetTarget(cfg.URL, cfg.Secrets)
	return s, nil
}

// scope is the outbox part the sender delivers: its group's rows, every
// type (the group only holds rows of the types its tokens may see).
func (s *Sender) scope() store.EventScope { return store.EventScope{Group: s.cfg.Group} }

// Run delivers events until ctx ends, with Concurrency delivery loops.
// Several replicas may run a sender at once: each event is leased to one of
// them at a time.
//
// Drain (a field: call s.Drain()) makes Run claim nothing more: with
// Concurrency > 1 the deliveries in flight finish first (a group's new
// settings take over without leaving events to their lease), with 1 the
// batch in hand is left to its lease as when ctx ends.
func (s *Sender) Run(ctx context.Context) {
	claimCtx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.drained, stop)()
	if s.cfg.Concurrency > 1 {
		s.runConcurrent(ctx, claimCtx)
		return
	}
	s.loop(claimCtx)
}

// runConcurrent keeps up to Concurrency deliveries in flight: it claims as
// many events as there are free delivery slots (at most Batch), each leased
// for one delivery, and delivers each in a goroutine of its own. A slow
// receiver thus fills its own group's slots and then waits; it never takes
// a slot of another group (each group has its own Sender).
func (s *Sender) runConcurrent(ctx, claimCtx context.Context) {
	slots := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	lease := min(max(s.cfg.Timeout+5*time.Second, time.Second), time.Hour)
	storeFails := 0
	for claimCtx.Err() == nil {
		if !sleepCtx(claimCtx, time.Until(s.hold())) {
			return
		}
		free := s.takeSlots(claimCtx, slots)
		if free == 0 {
			return
		}
		events, err := s.store.Events().ClaimEvents(claimCtx, s.scope(), s.cfg.Consumer, free, lease)
		for range free - len(events) {
			<-slots
		}
		if err != nil {
			if claimCtx.Err() != nil {
				return
			}
			s.storeFailed("webhook: delivery pass failed", err)
			storeFails++
			sleepCtx(claimCtx, capped(s.cfg.PollInterval, storeFails, s.cfg.BackoffMax))
			continue
		}
		storeFails = 0
		leaseEnd := time.Now().Add(lease - s.cfg.Timeout)
		for _, e := range events {
			wg.Go(func() {
				defer func() { <-slots }()
				// Held past what the lease leaves: the event comes back when
				// the lease ends.
				if s.hold().After(leaseEnd) || !sleepCtx(ctx, time.Until(s.hold())) {
					return
				}
				if err := s.deliverOne(ctx, e); err != nil && ctx.Err() == nil {
					s.storeFailed("webhook: recording a delivery failed", err)
				}
			})
		}
		if len(events) < free {
			sleepCtx(claimCtx, s.cfg.PollInterval)
		}
	}
}

// takeSlots waits for one free delivery slot and takes every other free
// one, up to Batch; 0 when ctx ended first.
func (s *Sender) takeSlots(ctx context.Context, slots chan struct{}) int {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < s.cfg.Batch {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// storeFailed logs a failure of the database: once per outage when the
// replica's tracker knows it is down.
func (s *Sender) storeFailed(msg string, err error) {
	if s.cfg.Outage == nil || !s.cfg.Outage.Failed(msg, err) {
		s.log.Warn(msg, "err", err)
	}
}

// loop delivers one batch at a time: claim a batch, deliver it in order,
// again.
func (s *Sender) loop(ctx context.Context) {
	storeFails := 0
	for ctx.Err() == nil {
		if !sleepCtx(ctx, time.Until(s.hold())) {
			return
		}
		n, err := s.RunOnce(ctx)
		wait := s.cfg.PollInterval
		switch {
		case err != nil && ctx.Err() == nil:
			s.storeFailed("webhook: delivery pass failed", err)
			storeFails++
			wait = capped(s.cfg.PollInterval, storeFails, s.cfg.BackoffMax)
		case n > 0:
			storeFails = 0
			continue
		default:
			storeFails = 0
		}
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// sleepCtx waits d (nothing when d ≤ 0); false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// capped is base·2^(n-1) capped at max, plus up to 20% jitter so replicas
// and events do not retry in lockstep.
func capped(base time.Duration, n int, max time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// RunOnce claims one batch and attempts each event once; it returns how
// many events were claimed.
func (s *Sender) RunOnce(ctx context.Context) (int, error) {
	// The lease covers every delivery of the batch, so no other sender
	// takes these events while this one still works on them.
	lease := time.Duration(s.cfg.Batch)*s.cfg.Timeout + 5*time.Second
	lease = min(max(lease, time.Second), time.Hour)
	events, err := s.store.Events().ClaimEvents(ctx, s.scope(), s.cfg.Consumer, s.cfg.Batch, lease)
	if err != nil {
		return 0, err
	}
	leaseEnd := time.Now().Add(lease - s.cfg.Timeout)
	for _, e := range events {
		// The receiver said it is down: wait out the hold, if the lease
		// leaves time to; otherwise the rest of the batch comes back when
		// the lease ends.
		if hold := s.hold(); time.Until(hold) > 0 && hold.After(leaseEnd) {
			return len(events), nil
		}
		if !sleepCtx(ctx, time.Until(s.hold())) {
			// Unfinished events come back when the lease ends.
			return len(events), ctx.Err()
		}
		if err := s.deliverOne(ctx, e); err != nil {
			return len(events), err
		}
	}
	return len(events), nil
}

// deliverOne sends one event and records the outcome. Only store errors are
// returned; a failed delivery is recorded, not returned.
func (s *Sender) deliverOne(ctx context.Context, e store.Event) error {
	derr := s.deliver(ctx, e)
	var down *receiverDown
	errors.As(derr, &down)
	s.noteAnswer(ctx, derr, down)
	if derr == nil {
		if _, err := s.store.Events().AckEvents(ctx, s.scope(), s.cfg.Consumer, []int64{e.ID}); err != nil {
			return fmt.Errorf("webhook: ack event %d: %w", e.ID, err)
		}
		s.log.Debug("webhook delivered", "event_id", e.ID, "attempt", e.DeliveryAttempt)
		s.observe("delivered")
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	retry := s.backoff(e.DeliveryAttempt)
	if down != nil {
		retry = max(retry, time.Until(s.hold()))
	}
	if err := s.store.Events().FailEventDelivery(ctx, s.scope(), s.cfg.Consumer, e.ID, derr.Error(), retry, s.cfg.MaxAttempts); err != nil {
		return fmt.Errorf("webhook: record failed delivery of event %d: %w", e.ID, err)
	}
	if e.DeliveryAttempt >= s.cfg.MaxAttempts {
		s.observe("dead")
		s.log.Error("webhook: event is dead after its last attempt", "event_id", e.ID, "job_id", e.JobID,
			"attempts", e.DeliveryAttempt, "err", derr)
	} else {
		s.observe("failed")
		s.log.Warn("webhook: delivery failed; will retry", "event_id", e.ID, "attempt", e.DeliveryAttempt,
			"retry_in", retry, "err", derr)
	}
	return nil
}

// noteAnswer updates the shared hold after a delivery: a receiver that is
// down holds every loop, longer each time; one that answers ends the hold.
func (s *Sender) noteAnswer(ctx context.Context, derr error, down *receiverDown) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if down != nil {
		s.downs++
		hold := max(down.retryAfter, capped(s.cfg.BackoffBase, s.downs, s.cfg.BackoffMax))
		if until := time.Now().Add(hold); until.After(s.holdUntil) {
			s.holdUntil = until
		}
		if s.downs == 1 {
			s.log.Warn("webhook: receiver unavailable; holding deliveries", "hold", hold.String(), "err", derr)
		}
	} else if derr == nil || ctx.Err() == nil {
		if s.downs > 0 {
			s.log.Info("webhook: receiver answering again", "unavailable_answers", s.downs)
		}
		s.downs = 0
	}
}

// backoff is the delay after the n-th failed attempt of one event:
// base·2^(n-1), capped, jittered.
func (s *Sender) backoff(n int) time.Duration { return capped(s.cfg.BackoffBase, n, s.cfg.BackoffMax) }

// receiverDown is a delivery the receiver refused for now (503, 429) or
// that could not reach it; retryAfter is the receiver's Retry-After.
type receiverDown struct {
	err        error
	retryAfter time.Duration
}

func (e *receiverDown) Error() string { return e.err.Error() }
func (e *receiverDown) Unwrap() error { return e.err }

// retryAfter reads a Retry-After in seconds or as an HTTP date (0 if
// absent or unreadable), capped at an hour.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(h); err == nil && n > 0 {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), time.Hour)
}

// deliver POSTs one signed event; nil only on a 2xx answer.
func (s *Sender) deliver(ctx context.Context, e store.Event) error {
	wire, err := WireEvent(e)
	if err != nil {
		return err
	}
	body, err := json.Marshal(wire)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	to := s.target.Load()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "kece-webhook/1")
	now := time.Now()
	req.Header.Set(IDHeader, wire.EventId)
	req.Header.Set(TimestampHeader, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(StandardSignatureHeader, SignStandard(to.secrets, wire.EventId, now, body))
	// The pre-standard header, kept for one release (docs/business.md).
	req.Header.Set(SignatureHeader, Sign(to.secrets[0].key, now, body))
	req.Header.Set(EventIDHeader, wire.EventId)
	req.Header.Set(AttemptHeader, strconv.Itoa(int(wire.DeliveryAttempt)))
	resp, err := s.client.Do(req)
	if err != nil {
		// The URL may carry a path the operator considers private; keep
		// only the error class.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		err = fmt.Errorf("post: %w", err)
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Not reached, or no answer within the timeout.
			return &receiverDown{err: err}
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytesRead))
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests:
		return &receiverDown{err: fmt.Errorf("receiver answered %d", resp.StatusCode),
			retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return nil
}
