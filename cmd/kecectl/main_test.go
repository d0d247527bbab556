package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/controltest"
)

// ctl runs kecectl in-process as a user would, with an environment of its own.
type ctl struct {
	t   *testing.T
	env map[string]string
}

type outcome struct {
	code           int
	stdout, stderr string
}

func (c ctl) run(args ...string) outcome {
	c.t.Helper()
	var out, errb bytes.Buffer
	cl := &cli{ctx: context.Background(), out: &out, errOut: &errb, getenv: func(k string) string { return c.env[k] },
		pollEvery: 20 * time.Millisecond, output: outputTable}
	code := cl.execute(args)
	return outcome{code, out.String(), errb.String()}
}

// ok runs a command that must succeed.
func (c ctl) ok(args ...string) string {
	c.t.Helper()
	o := c.run(args...)
	require.Equal(c.t, exitOK, o.code, "kecectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), o.stdout, o.stderr)
	return o.stdout
}

// fails runs a command that must exit with code and name want on stderr.
func (c ctl) fails(code int, want string, args ...string) outcome {
	c.t.Helper()
	o := c.run(args...)
	require.Equal(c.t, code, o.code, "kecectl %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), o.stdout, o.stderr)
	require.Contains(c.t, o.stderr, want)
	return o
}

var joinCodeRE = regexp.MustCompile(`kjc_[A-Za-z0-9_-]+`)

func machine(t *testing.T, url, token string) *machineapi.ClientWithResponses {
	t.Helper()
	c, err := machineapi.NewClientWithResponses(url, machineapi.WithRequestEditorFn(controltest.Bearer(token)))
	require.NoError(t, err)
	return c
}

// fakeNode plays a node process over the machine protocol: it joins, opens a
// session and heartbeats; the test drives its claims and results.
type fakeNode struct {
	t  *testing.T
	nc *machineapi.ClientWithResponses
}

func joinNode(t *testing.T, url, code, pool, boot string) *fakeNode {
	t.Helper()
	ctx := context.Background()
	p := machineapi.Pool(pool)
	j, err := machine(t, url, "").JoinNodeWithResponse(ctx, machineapi.JoinRequest{JoinCode: code, Pool: &p})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, j.StatusCode(), string(j.Body))
	s, err := machine(t, url, j.JSON201.Credential).OpenSessionWithResponse(ctx, machineapi.SessionRequest{BootId: boot, ProtocolVersion: 1})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, s.StatusCode(), string(s.Body))
	n := &fakeNode{t: t, nc: machine(t, url, s.JSON200.SessionToken)}
	n.heartbeat()
	return n
}

func (n *fakeNode) heartbeat() {
	n.t.Helper()
	hb, err := n.nc.SendHeartbeatWithResponse(context.Background(), machineapi.HeartbeatRequest{RuntimeVersion: "kece-node v9.8.7; g++ 12",
		Dependencies: []machineapi.Dependency{{Name: "docker", Healthy: true}}, LocalSlots: 2})
	require.NoError(n.t, err)
	require.Equal(n.t, http.StatusOK, hb.StatusCode(), string(hb.Body))
}

// heartbeatUntilDone heartbeats every 20ms until the test ends, as a live node does.
func (n *fakeNode) heartbeatUntilDone() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_, _ = n.nc.SendHeartbeatWithResponse(ctx, machineapi.HeartbeatRequest{RuntimeVersion: "kece-node v9.8.7; g++ 12",
					Dependencies: []machineapi.Dependency{}, LocalSlots: 2})
			}
		}
	}()
}

// claim claims up to want jobs at once.
func (n *fakeNode) claim(want int) []machineapi.ClaimedJob { return n.claimWaiting(want, 0) }

// claimWaiting claims up to want jobs in a long-poll of waitMs, as a node does.
func (n *fakeNode) claimWaiting(want int, waitMs int64) []machineapi.ClaimedJob {
	n.t.Helper()
	r, err := n.nc.ClaimJobsWithResponse(context.Background(), machineapi.ClaimRequest{FreeSlots: int32(want), WaitMs: waitMs})
	require.NoError(n.t, err)
	require.Equal(n.t, http.StatusOK, r.StatusCode(), string(r.Body))
	return r.JSON200.Jobs
}

// pass posts an all-AC verdict for a claimed job, with phases as a node
// measures them (the claim's queue wait and made-up timings).
func (n *fakeNode) pass(job machineapi.ClaimedJob) {
	n.t.Helper()
	v := &machineapi.Verdict{Status: machineapi.VerdictStatusAC}
	for _, c := range job.Manifest.Cases {
		v.Cases = append(v.Cases, machineapi.CaseResult{CaseId: c.CaseId, Status: machineapi.VerdictStatusAC, Score: float64(c.Weight)})
		v.Score += float64(c.Weight)
	}
	v.MaxScore = int64(v.Score)
	require.NotNil(n.t, job.QueuedMs, "a claim answer tells the queue wait")
	ph := &machineapi.ResultPhases{QueueMs: job.QueuedMs, DownloadMs: 4, SandboxMs: 210, CompileMs: 1250, RunMs: 30, CheckMs: 2,
		ExecuteMs: 1495, TotalMs: 1502, CheckerCached: true}
	res, err := n.nc.SubmitResultWithResponse(context.Background(), job.JobId, machineapi.ResultRequest{LeaseEpoch: job.LeaseEpoch,
		Outcome: machineapi.OutcomeVerdict, Verdict: v, Phases: ph})
	require.NoError(n.t, err)
	require.Equal(n.t, http.StatusOK, res.StatusCode(), string(res.Body))
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(s), &v), s)
	return v
}
