package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCaseScoreAndStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fraction float64
		weight   int64
		score    float64
		status   Status
	}{
		{1, 10, 10, StatusAccepted},
		{0, 10, 0, StatusWrongAnswer},
		{0.5, 10, 5, StatusPartial},
		{1.0 / 3, 1, 0.3333, StatusPartial},
		{2.0 / 3, 1, 0.6667, StatusPartial}, // half away from zero at 4 places
		{0.00001, 1, 0, StatusPartial},      // earns less than the resolution
		{1.0000000000000002, 7, 7, StatusAccepted},
		{0.25, 0, 0, StatusPartial}, // a zero-weight case still says how it went
		{0.123456, 1_000_000, 123456, StatusPartial},
	} {
		require.Equal(t, tc.score, CaseScore(tc.fraction, tc.weight), "fraction %v weight %d", tc.fraction, tc.weight)
		require.Equal(t, tc.status, CaseStatus(tc.fraction), "fraction %v", tc.fraction)
	}
}

func TestSumScoresHasNoDrift(t *testing.T) {
	t.Parallel()
	var cases []CaseResult
	for range 10 {
		cases = append(cases, CaseResult{Score: 0.1})
	}
	require.Equal(t, 1.0, SumScores(cases))
	require.Equal(t, int64(10_000), ScoreUnits(SumScores(cases)))
}

func TestJobStatus(t *testing.T) {
	t.Parallel()
	cs := func(st ...Status) []CaseResult {
		out := make([]CaseResult, len(st))
		for i, s := range st {
			out[i] = CaseResult{Status: s}
		}
		return out
	}
	for _, tc := range []struct {
		cases []CaseResult
		want  Status
	}{
		{cs(StatusAccepted, StatusAccepted), StatusAccepted},
		{cs(StatusAccepted, StatusPartial, StatusAccepted), StatusPartial},
		{cs(StatusPartial, StatusWrongAnswer), StatusWrongAnswer},
		{cs(StatusPartial, StatusTimeLimitExceeded, StatusWrongAnswer), StatusTimeLimitExceeded},
		{cs(StatusWrongAnswer, StatusPartial), StatusWrongAnswer},
		{cs(StatusRuntimeError, StatusWrongAnswer), StatusRuntimeError},
		{nil, StatusAccepted},
	} {
		require.Equal(t, tc.want, JobStatus(tc.cases), "%v", tc.cases)
	}
	require.True(t, StatusPartial.Valid())
}
