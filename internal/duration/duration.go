// Package duration reads the durations every KECE surface takes — the
// daemons' settings, kecectl's flags and the console's forms — in one
// syntax: Go's (90s, 15m, 1h30m) plus a day unit ("7d", "90d", "1d12h"),
// so a token's life is written as an operator says it, not as 2160h.
package duration

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Day is the length of the "d" unit: 24 hours (no calendar, no DST).
const Day = 24 * time.Hour

// errSyntax is the one message every surface shows for a bad duration.
var errSyntax = errors.New("not a duration such as 90s, 15m, 24h or 7d")

// Parse reads s: a Go duration, optionally led by whole days ("7d",
// "1d12h"). A sign applies to the whole value ("-1d" is -24h).
func Parse(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimLeft(t, "+-")
	var days time.Duration
	if i := strings.IndexByte(t, 'd'); i >= 0 {
		n, err := strconv.ParseInt(t[:i], 10, 32)
		if err != nil || n < 0 {
			return 0, errSyntax
		}
		days, t = time.Duration(n)*Day, t[i+1:]
		if t == "" {
			t = "0s"
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil || strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
		return 0, errSyntax
	}
	d += days
	if neg {
		d = -d
	}
	return d, nil
}

// Format writes d the way Parse reads it, with whole days as "d" and the
// rest in Go's form without zero units: 90d, 1d12h, 15m, 1m30s.
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	var b strings.Builder
	b.WriteString(sign)
	if days := d / Day; days > 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10) + "d")
		d -= days * Day
	}
	if d > 0 {
		s := d.String()
		// 12h0m0s → 12h, 1h30m0s → 1h30m, 15m0s → 15m.
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		b.WriteString(s)
	}
	return b.String()
}

// Value is a duration flag (the pflag.Value and flag.Value interfaces)
// that takes the day unit and refuses a negative value.
type Value struct{ D *time.Duration }

// String returns the current value in Format's form; zero is "0", which
// help (pflag) takes for "no default" rather than printing "(default 0s)".
func (v Value) String() string {
	if v.D == nil || *v.D == 0 {
		return "0"
	}
	return Format(*v.D)
}

// Set parses s.
func (v Value) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*v.D = d
	return nil
}

// Type names the value in help ("--expires-in duration").
func (Value) Type() string { return "duration" }
