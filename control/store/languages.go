package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// LanguageReport is one language as a node's heartbeat reports it (the
// machine contract's LanguageReport, stored as JSON on the node row).
type LanguageReport struct {
	ID               string `json:"id"`
	Pool             string `json:"pool"`
	Standard         string `json:"standard"`
	Version          string `json:"version"`
	CompileCommand   string `json:"compileCommand"`
	RunCommand       string `json:"runCommand"`
	EntryPoint       string `json:"entryPoint"`
	ExtraMemoryBytes int64  `json:"extraMemoryBytes"`
	MinMemoryBytes   int64  `json:"minMemoryBytes"`
}

// LanguageVariant is one distinct report of a language and how many ready
// nodes send exactly it.
type LanguageVariant struct {
	Version          string
	CompileCommand   string
	RunCommand       string
	EntryPoint       string
	ExtraMemoryBytes int64
	Nodes            int
}

// LanguageInfo is an accepted language id with what the ready nodes of its
// pool report for it.
type LanguageInfo struct {
	contracts.Language
	ReadyNodes int
	// Variants are the distinct reports, most nodes first; more than one
	// means the pool's nodes disagree (Mixed).
	Variants []LanguageVariant
}

// Mixed reports whether ready nodes report more than one variant.
func (l LanguageInfo) Mixed() bool { return len(l.Variants) > 1 }

// LanguageCatalog is the snapshot served by GET /api/v1/languages.
type LanguageCatalog struct {
	AsOf      time.Time
	Languages []LanguageInfo
}

// Languages lists every accepted language id with the reports of the ready
// nodes (enabled, not revoked, heartbeat fresh — the public summary's rule).
func (s *Nodes) Languages(ctx context.Context) (LanguageCatalog, error) {
	var out LanguageCatalog
	if err := s.db.Pool.QueryRowContext(ctx, `SELECT NOW(6)`).Scan(&out.AsOf); err != nil {
		return out, fmt.Errorf("store: languages: %w", err)
	}
	var raws [][]byte
	if err := s.db.Pool.SelectContext(ctx, &raws,
		`SELECT reported_languages FROM judge_node
		 WHERE desired_state = 'ENABLED' AND revoked_at IS NULL AND reported_languages IS NOT NULL
		   AND last_heartbeat_at > NOW(6) - INTERVAL ? MICROSECOND`, jobdb.Micros(s.db.Cfg.OfflineAfter)); err != nil {
		return out, fmt.Errorf("store: languages: %w", err)
	}
	var perNode [][]LanguageReport
	for _, raw := range raws {
		var reps []LanguageReport
		// A report that does not decode was refused at heartbeat time; one
		// that still fails (a column edited by hand) counts as no report.
		if json.Unmarshal(raw, &reps) == nil {
			perNode = append(perNode, reps)
		}
	}
	out.Languages = catalog(contracts.Languages(), perNode)
	return out, nil
}

// catalog joins the contract's language table with the nodes' reports: each
// accepted id once, in table order, with the distinct variants the nodes of
// its pool report for that id. Reports of ids the table does not accept, or
// under the wrong pool, are ignored.
func catalog(table []contracts.Language, perNode [][]LanguageReport) []LanguageInfo {
	out := make([]LanguageInfo, len(table))
	index := make(map[string]int, len(table))
	for i, l := range table {
		out[i] = LanguageInfo{Language: l, Variants: []LanguageVariant{}}
		index[l.ID] = i
	}
	for _, reps := range perNode {
		seen := map[string]bool{}
		for _, r := range reps {
			i, ok := index[r.ID]
			if !ok || seen[r.ID] || table[i].Pool != r.Pool {
				continue
			}
			seen[r.ID] = true
			li := &out[i]
			li.ReadyNodes++
			v := LanguageVariant{Version: r.Version, CompileCommand: r.CompileCommand, RunCommand: r.RunCommand,
				EntryPoint: r.EntryPoint, ExtraMemoryBytes: r.ExtraMemoryBytes}
			j := slices.IndexFunc(li.Variants, func(w LanguageVariant) bool {
				w.Nodes = v.Nodes // compare everything but the count
				return w == v
			})
			if j < 0 {
				li.Variants = append(li.Variants, v)
				j = len(li.Variants) - 1
			}
			li.Variants[j].Nodes++
		}
	}
	for i := range out {
		slices.SortStableFunc(out[i].Variants, func(a, b LanguageVariant) int { return cmp.Compare(b.Nodes, a.Nodes) })
	}
	return out
}

// checkLanguageReports validates a heartbeat's language reports and returns
// them as the JSON to store (nil: none sent, keep the previous report).
func checkLanguageReports(reps []LanguageReport) ([]byte, error) {
	if reps == nil {
		return nil, nil
	}
	if len(reps) > 32 {
		return nil, jobdb.Invalid("languages", "at most 32 reports")
	}
	for _, r := range reps {
		l, ok := contracts.LookupLanguage(r.ID)
		if !ok {
			return nil, jobdb.Invalid("languages", "unknown language id %q (known: %s)", r.ID, contracts.CanonicalLanguages)
		}
		if r.Pool != l.Pool {
			return nil, jobdb.Invalid("languages", "language %s is judged by pool %s, not %s", r.ID, l.Pool, r.Pool)
		}
	}
	b, err := json.Marshal(reps)
	if err != nil {
		return nil, fmt.Errorf("store: language reports: %w", err)
	}
	if len(b) > 64<<10 {
		return nil, jobdb.Invalid("languages", "at most 64 KiB in all")
	}
	return b, nil
}
