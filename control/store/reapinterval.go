package store

import (
	"fmt"
	"time"
)

// The reap interval is one fact with one home: how often each replica's
// maintenance (control/maintenance) scans for expired leases, which
// Reconcile also needs (a lease expired for longer than two intervals means
// a stuck reaper). Everything else — maintenance, the replica, kece-control's
// --reap-interval of serve and reconcile — takes its default and bounds from
// here.
const (
	// ReapIntervalDefault is the reap scan period (DESIGN §6: every 5 s).
	ReapIntervalDefault = 5 * time.Second
	// ReapIntervalMin is the shortest reap interval a replica accepts: a
	// shorter one only hammers the database.
	ReapIntervalMin = 10 * time.Millisecond
)

// CheckReapInterval refuses a reap interval below ReapIntervalMin.
func CheckReapInterval(d time.Duration) error {
	if d < ReapIntervalMin {
		return fmt.Errorf("reap interval %s is below %s", d, ReapIntervalMin)
	}
	return nil
}
