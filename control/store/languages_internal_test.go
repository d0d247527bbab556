package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
)

// catalog joins the table with the reports: every accepted id once, distinct
// variants counted, foreign ids and wrong pools ignored, a node counted once
// per id.
func TestCatalogJoinsTableAndReports(t *testing.T) {
	t.Parallel()
	table := []contracts.Language{
		{ID: "cpp17", Pool: "cpp", Standard: "C++17"},
		{ID: "cpp20", Pool: "cpp", Standard: "C++20"},
		{ID: "python3", Pool: "python", Standard: "Python 3"},
	}
	v12 := LanguageReport{ID: "cpp17", Pool: "cpp", Version: "g++ 12", CompileCommand: "g++ -std=gnu++17", RunCommand: "./main"}
	v13 := v12
	v13.Version = "g++ 13"
	for _, tc := range []struct {
		name    string
		reports [][]LanguageReport
		check   func(t *testing.T, got []LanguageInfo)
	}{
		{"no nodes", nil, func(t *testing.T, got []LanguageInfo) {
			require.Len(t, got, 3)
			for _, l := range got {
				require.Zero(t, l.ReadyNodes)
				require.Empty(t, l.Variants)
				require.False(t, l.Mixed())
			}
		}},
		{"agreeing nodes", [][]LanguageReport{{v12}, {v12}}, func(t *testing.T, got []LanguageInfo) {
			require.Equal(t, 2, got[0].ReadyNodes)
			require.Len(t, got[0].Variants, 1)
			require.Equal(t, 2, got[0].Variants[0].Nodes)
			require.False(t, got[0].Mixed())
			require.Zero(t, got[1].ReadyNodes, "cpp20 was not reported")
		}},
		{"mixed versions, most nodes first", [][]LanguageReport{{v13}, {v12}, {v12}}, func(t *testing.T, got []LanguageInfo) {
			require.True(t, got[0].Mixed())
			require.Equal(t, 3, got[0].ReadyNodes)
			require.Equal(t, "g++ 12", got[0].Variants[0].Version)
			require.Equal(t, 2, got[0].Variants[0].Nodes)
			require.Equal(t, 1, got[0].Variants[1].Nodes)
		}},
		{"unknown id, wrong pool and repeats ignored", [][]LanguageReport{{
			{ID: "cobol", Pool: "cpp"}, {ID: "python3", Pool: "cpp"}, v12, v12,
		}}, func(t *testing.T, got []LanguageInfo) {
			require.Equal(t, 1, got[0].ReadyNodes)
			require.Equal(t, 1, got[0].Variants[0].Nodes)
			require.Zero(t, got[2].ReadyNodes)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.check(t, catalog(table, tc.reports))
		})
	}
}
