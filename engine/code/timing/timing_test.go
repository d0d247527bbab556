package timing

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	limit := time.Second
	ms := time.Millisecond
	cpuTLE := func(d time.Duration) engine.CaseResult {
		return engine.CaseResult{Status: engine.StatusTimeLimitExceeded, CPUTime: d, Message: "CPU time limit exceeded"}
	}
	ac := func(d time.Duration) engine.CaseResult {
		return engine.CaseResult{Status: engine.StatusAccepted, CPUTime: d}
	}
	for _, tc := range []struct {
		pct  int
		cr   engine.CaseResult
		want string
	}{
		{98, ac(985 * ms), ""},
		{110, cpuTLE(1005 * ms), ""},
		{98, ac(1001 * ms), ACOverLimitTime},
		{98, cpuTLE(990 * ms), TLEUnderLimitTime},
		{102, cpuTLE(1000 * ms), TLEUnderLimitTime}, // equal is within the limit
		{95, cpuTLE(1003 * ms), UnderLimitTLE},
		{90, engine.CaseResult{Status: engine.StatusTimeLimitExceeded, CPUTime: 300 * ms, Message: "wall time limit exceeded"}, UnderLimitWallTLE},
		{110, ac(990 * ms), OverLimitNotTLE},
		{102, engine.CaseResult{Status: engine.StatusRuntimeError}, OverLimitNotTLE},
		{90, engine.CaseResult{Status: engine.StatusWrongAnswer, CPUTime: 900 * ms}, UnexpectedStatus},
	} {
		o := Judge(limit, Run{Mode: "self", Percent: tc.pct}, tc.cr)
		require.Equal(t, tc.want, o.Contradiction, "%d%% %+v", tc.pct, tc.cr)
	}
	o := Judge(limit, Run{Mode: "self", Percent: 98}, ac(985*ms))
	require.Equal(t, 5*ms, o.Error, "reported minus the burner's target")
}

func TestPlanAndStats(t *testing.T) {
	t.Parallel()
	plan := Plan(2, []string{"self", "child"})
	require.Len(t, plan, 2*len(Levels)*2)
	require.Equal(t, "self 1000 90\n", plan[0].Input(time.Second))
	require.Equal(t, "980000\n", Run{Percent: 98}.Expected(time.Second))
	var s Stats
	s.Add(time.Second, Outcome{Run: Run{Percent: 98}, Status: engine.StatusAccepted, Error: 3 * time.Millisecond})
	s.Add(time.Second, Outcome{Run: Run{Percent: 110}, Status: engine.StatusTimeLimitExceeded, Reported: 1010 * time.Millisecond})
	s.Add(time.Second, Outcome{Run: Run{Percent: 95}, Status: engine.StatusTimeLimitExceeded, Reported: 1001 * time.Millisecond, Contradiction: UnderLimitTLE})
	kv := s.KV()
	for _, want := range []string{"runs=3", "ac=1", "tle=2", "contradictions=1", "err_ms_mean=3.00", "tle_over_limit_ms_max=10.00"} {
		require.True(t, strings.Contains(kv, want), "%s in %s", want, kv)
	}
}

func TestBurnersEmbedded(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"cpp", "python", "java"} {
		b, err := ForPool(p)
		require.NoError(t, err)
		require.NotEmpty(t, b.Source)
		require.Contains(t, b.Modes, "self")
	}
	_, err := ForPool("arkts")
	require.Error(t, err)
}
