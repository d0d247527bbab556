package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/kece-oj/kece/contracts/adminapi"
)

// progress shows what a --wait is waiting for. On a terminal it rewrites one
// status line in place; otherwise (a pipe, a log, CI) it prints a plain line
// each time the status changes, so logs stay readable.
type progress struct {
	w    io.Writer
	tty  bool
	last string
	open bool
}

// progress shows on stdout for tables; with -o json|yaml stdout carries only
// the final object, and the progress goes to stderr.
func (c *cli) progress() *progress {
	if c.output == outputTable {
		return newProgress(c.out)
	}
	return newProgress(c.errOut)
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

// update shows the current status and how long the wait has lasted. A
// plain (non-terminal) display prints a line only when the status changes.
func (p *progress) update(status string, elapsed time.Duration) {
	line := fmt.Sprintf("%s (%s)", status, elapsed.Round(time.Second))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.open = true
		return
	}
	if status != p.last {
		fmt.Fprintln(p.w, line)
	}
	p.last = status
}

// done ends the status display with a final line.
func (p *progress) done(line string) {
	p.close()
	fmt.Fprintln(p.w, line)
}

// close clears a status line left open on a terminal.
func (p *progress) close() {
	if p.open {
		fmt.Fprint(p.w, "\r\033[K")
		p.open = false
	}
}

// errWaitTimeout: --timeout passed before the awaited outcome.
var errWaitTimeout = errors.New("gave up waiting")

// poll calls step every c.poll until it reports done or fails, or the
// timeout passes. step returns the status line to show.
func (c *cli) poll(timeout time.Duration, p *progress, step func(elapsed time.Duration) (line string, done bool, err error)) error {
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(c.pollEvery)
	defer tick.Stop()
	for {
		line, done, err := step(time.Since(start))
		if err != nil {
			p.close()
			return err
		}
		if done {
			return nil
		}
		p.update(line, time.Since(start))
		select {
		case <-ctx.Done():
			if c.ctx.Err() != nil {
				return c.ctx.Err()
			}
			p.close()
			return fmt.Errorf("%w after %s (--timeout): %s", errWaitTimeout, timeout, line)
		case <-tick.C:
		}
	}
}

// waitCheck follows one self-check to PASSED (nil) or FAILED (an error).
func (c *cli) waitCheck(nodeID, checkID, jobID string, timeout time.Duration) error {
	p := c.progress()
	var final *adminapi.NodeCheck
	err := c.poll(timeout, p, func(time.Duration) (string, bool, error) {
		d, err := c.getNode(nodeID)
		if err != nil {
			return "", false, err
		}
		for i := range d.Checks {
			ch := &d.Checks[i]
			if ch.CheckId != checkID {
				continue
			}
			switch ch.State {
			case adminapi.CheckStatePassed, adminapi.CheckStateFailed:
				final = ch
				return "", true, nil
			}
			return fmt.Sprintf("self-check %s (job %s) of node %s: %s", checkID, jobID, d.Node.Name, ch.State), false, nil
		}
		return fmt.Sprintf("self-check %s (job %s) of node %s: not listed yet", checkID, jobID, d.Node.Name), false, nil
	})
	if err != nil {
		return err
	}
	if final.State == adminapi.CheckStateFailed {
		p.done(fmt.Sprintf("self-check %s FAILED: %s", checkID, deref(final.ErrorCode, "no error code")))
		return fmt.Errorf("self-check %s of node %s failed (%s); see 'kecectl node show %s' and 'kecectl job show %s'",
			checkID, nodeID, deref(final.ErrorCode, "no error code"), nodeID, jobID)
	}
	p.done(fmt.Sprintf("self-check %s PASSED (runtime %s); enable the node with 'kecectl node enable %s --reason ...'",
		checkID, deref(final.RuntimeVersion, "-"), nodeID))
	return c.emitFinal(final)
}

// waitEnabled waits until the node heartbeated after it was enabled, so the
// running process knows it may claim.
func (c *cli) waitEnabled(nodeID string, timeout time.Duration) error {
	p := c.progress()
	var n adminapi.Judger
	err := c.poll(timeout, p, func(elapsed time.Duration) (string, bool, error) {
		d, err := c.getNode(nodeID)
		if err != nil {
			return "", false, err
		}
		n = d.Node
		if n.DesiredState != adminapi.DesiredStateEnabled {
			return "", false, fmt.Errorf("node %s is %s now, not ENABLED (someone changed it)", n.Name, n.DesiredState)
		}
		// Heartbeat age is server time: a heartbeat younger than the time
		// since enabling arrived after the change.
		if n.Health.Online && n.Health.HeartbeatAgeMs != nil && time.Duration(*n.Health.HeartbeatAgeMs)*time.Millisecond < elapsed {
			return "", true, nil
		}
		if !n.Health.Online {
			return fmt.Sprintf("node %s is ENABLED; waiting for the node process to come online (last heartbeat %s ago)",
				n.Name, age(n.Health.HeartbeatAgeMs)), false, nil
		}
		return fmt.Sprintf("node %s is ENABLED; waiting for its next heartbeat", n.Name), false, nil
	})
	if err != nil {
		return err
	}
	p.done(fmt.Sprintf("node %s (%s) is ENABLED and online; it claims %s jobs", n.NodeId, n.Name, n.Pool))
	return c.emitFinal(n)
}

// waitDrained waits until the node holds no lease, or the control plane
// disabled it at the drain deadline.
func (c *cli) waitDrained(nodeID string, timeout time.Duration) error {
	p := c.progress()
	var n adminapi.Judger
	err := c.poll(timeout, p, func(time.Duration) (string, bool, error) {
		d, err := c.getNode(nodeID)
		if err != nil {
			return "", false, err
		}
		n = d.Node
		switch {
		case n.DesiredState == adminapi.DesiredStateDisabled:
			return "", true, nil
		case n.DesiredState != adminapi.DesiredStateDraining:
			return "", false, fmt.Errorf("node %s is %s now, not DRAINING (someone changed it)", n.Name, n.DesiredState)
		case n.LeasesInFlight == 0:
			return "", true, nil
		}
		line := fmt.Sprintf("draining node %s: %d leases in flight", n.Name, n.LeasesInFlight)
		if n.DrainDeadlineAt != nil {
			line += ", deadline " + stamp(*n.DrainDeadlineAt)
		}
		return line, false, nil
	})
	if err != nil {
		return err
	}
	if n.DesiredState == adminapi.DesiredStateDisabled {
		p.done(fmt.Sprintf("node %s (%s) is DISABLED (the drain deadline passed and its remaining leases were requeued, or an admin disabled it)", n.NodeId, n.Name))
		return c.emitFinal(n)
	}
	p.done(fmt.Sprintf("node %s (%s) is drained: no lease left; disable it with 'kecectl node disable %s --reason ...'",
		n.NodeId, n.Name, n.Name))
	return c.emitFinal(n)
}

// emitFinal prints the awaited object for -o json|yaml (the table form was
// the progress display's last line).
func (c *cli) emitFinal(v any) error {
	if c.output == outputTable {
		return nil
	}
	return c.emit(v, nil)
}
