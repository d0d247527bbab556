package console

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/kece-oj/kece/control/forwarded"
)

// Defaults for Config.
const (
	// SessionIdleDefault ends a console session after this long without a request.
	SessionIdleDefault = 30 * time.Minute
	// SessionMaxDefault ends a console session this long after login.
	SessionMaxDefault = 12 * time.Hour
	// LiveIntervalDefault is how often live parts of a page refresh.
	LiveIntervalDefault = 2 * time.Second
)

// Config tunes the console.
type Config struct {
	// SessionIdle and SessionMax are the idle and absolute session expiries.
	SessionIdle time.Duration
	SessionMax  time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-Proto and
	// X-Forwarded-For are believed (the same list the admin API uses).
	// Default: none, so the Secure cookie flag follows the connection's own
	// TLS and the caller's address is the peer's.
	TrustedProxies forwarded.Proxies
	// LiveInterval is how often the browser refreshes the live parts.
	LiveInterval time.Duration
}

func (c Config) withDefaults() Config {
	c.SessionIdle = cmp.Or(c.SessionIdle, SessionIdleDefault)
	c.SessionMax = cmp.Or(c.SessionMax, SessionMaxDefault)
	c.LiveInterval = cmp.Or(c.LiveInterval, LiveIntervalDefault)
	return c
}

// Validate refuses nonsensical settings, naming each.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.SessionIdle < time.Minute {
		errs = append(errs, fmt.Errorf("console: session idle timeout %s is below 1m", c.SessionIdle))
	}
	if c.SessionMax < c.SessionIdle {
		errs = append(errs, fmt.Errorf("console: session lifetime %s is below the idle timeout %s", c.SessionMax, c.SessionIdle))
	}
	if c.LiveInterval < 200*time.Millisecond || c.LiveInterval > time.Minute {
		errs = append(errs, fmt.Errorf("console: live interval %s must be 200ms..1m", c.LiveInterval))
	}
	if err := c.TrustedProxies.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("console: %w", err))
	}
	return errors.Join(errs...)
}
