// Package checks holds the built-in self-check of each pool: one tiny
// known-answer program (read two integers, print their sum; for mysql a
// SELECT over a fixed table) and the manifest it is judged against. Verifying
// a node enqueues its pool's program as a CHECK job bound to that node; the
// node passes when the job ends AC.
//
// The package publishes its manifest and artifacts idempotently on first use
// (same content → same digests → same manifest). It must not import engine or
// worker: a check is judged by the node like any other job.
package checks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/internal/reference"
)

// Program is one pool's self-check: the source a node judges, its language,
// and the manifest with its files.
type Program struct {
	Pool     string
	Language string
	Source   string
	Manifest manifest.Manifest
	// Files are the manifest's artifacts by SHA-256.
	Files map[string][]byte
}

// Known-answer cases of the code pools: each case is one check step.
var codeCases = []struct{ in, out string }{
	{"1 2\n", "3\n"},
	{"40 2\n", "42\n"},
	{"-7 1000000000000\n", "999999999993\n"},
}

// The SQL self-check: a+b over a fixed table (its schema is below).
const sqlCheck = "SELECT a + b AS s FROM kece_check ORDER BY id"

// For returns the self-check of a pool.
func For(pool string) (Program, error) {
	if pool == string(machineapi.PoolMysql) {
		p := Program{Pool: pool, Language: "mysql", Source: sqlCheck, Files: map[string][]byte{}}
		s := func(v string) *string { return &v }
		p.Manifest = manifest.Manifest{
			Kind:    manifest.KindSQL,
			Checker: manifest.Checker{Type: "exact"},
			SQL: &manifest.SQL{
				ProblemKind: "SELECT",
				SchemaSQL:   "CREATE TABLE kece_check (id INT PRIMARY KEY, a BIGINT NOT NULL, b BIGINT NOT NULL)",
				SeedSQL:     "INSERT INTO kece_check (id, a, b) VALUES (1, 1, 2), (2, 40, 2), (3, -7, 1000000000000)",
				Expected: &manifest.ResultSet{Columns: []string{"s"}, Types: []string{"BIGINT"},
					Rows: [][]*string{{s("3")}, {s("42")}, {s("999999999993")}}},
				Ordered:            true,
				StatementTimeoutMs: 2000,
				MaxRows:            100,
				MaxBytes:           1 << 20,
			},
		}
		return p, p.Manifest.Validate()
	}
	ref, ok := reference.APlusB(pool)
	if !ok {
		return Program{}, fmt.Errorf("checks: unknown pool %q (want one of %s)", pool, strings.Join(contracts.Pools(), ", "))
	}
	p := Program{Pool: pool, Language: ref.Language, Source: ref.Source, Files: map[string][]byte{}}
	p.Manifest = manifest.Manifest{
		Kind: manifest.KindCode,
		// Generous: the check proves the pipeline works, not that it is fast.
		Limits:  manifest.Limits{TimeMs: 5000, MemoryMb: 256, OutputKb: 64},
		Checker: manifest.Checker{Type: "tolerant"},
	}
	for i, c := range codeCases {
		in, out := p.add([]byte(c.in)), p.add([]byte(c.out))
		p.Manifest.Cases = append(p.Manifest.Cases, manifest.Case{CaseID: fmt.Sprintf("step%d", i+1),
			InputSha256: in, InputSize: int64(len(c.in)), OutputSha256: out, OutputSize: int64(len(c.out)), Weight: 1})
	}
	return p, p.Manifest.Validate()
}

func (p *Program) add(b []byte) string {
	sum := sha256.Sum256(b)
	d := hex.EncodeToString(sum[:])
	p.Files[d] = b
	return d
}

// Published is a pool's self-check ready to enqueue.
type Published struct {
	Program
	ManifestID int64
}

// Publish stores the pool's check artifacts, registers them and publishes
// its manifest. Every step is idempotent, so it runs on every verify; the
// same content always yields the same manifest id.
func Publish(ctx context.Context, st *store.Store, arts *artifact.Store, pool string) (Published, error) {
	p, err := For(pool)
	if err != nil {
		return Published{}, err
	}
	for d, b := range p.Files {
		if _, err := arts.Put(ctx, d, int64(len(b)), bytes.NewReader(b)); err != nil {
			return Published{}, fmt.Errorf("checks: store %s artifact: %w", pool, err)
		}
		if err := st.Manifests().RegisterArtifact(ctx, d, int64(len(b))); err != nil {
			return Published{}, fmt.Errorf("checks: register %s artifact: %w", pool, err)
		}
	}
	pm, err := st.Manifests().PublishManifest(ctx, p.Manifest)
	if err != nil {
		return Published{}, fmt.Errorf("checks: publish %s manifest: %w", pool, err)
	}
	return Published{Program: p, ManifestID: pm.ID}, nil
}
