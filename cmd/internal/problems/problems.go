// Package problems builds the sample problems that the demo and the
// benchmarks judge, uploading their test data through the business API. It
// owns no publishing policy: callers publish the manifest and decide what a
// second publication (200, same manifest) means to them.
package problems

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/kece-oj/kece/contracts/businessapi"
)

// Upload stores content as an artifact (201 new, 200 already stored) and
// returns its digest and size.
func Upload(ctx context.Context, c *businessapi.ClientWithResponses, content string) (string, int64, error) {
	sum := sha256.Sum256([]byte(content))
	digest := hex.EncodeToString(sum[:])
	r, err := c.UploadArtifactWithBodyWithResponse(ctx, digest, "application/octet-stream", strings.NewReader(content))
	if err != nil {
		return "", 0, err
	}
	if r.StatusCode() != http.StatusCreated && r.StatusCode() != http.StatusOK {
		return "", 0, fmt.Errorf("upload: %d %s", r.StatusCode(), r.Body)
	}
	return digest, int64(len(content)), nil
}

// APlusB uploads the a+b problem's test data (3 cases, weights 30/30/40) and
// returns its CODE manifest, ready to publish.
func APlusB(ctx context.Context, c *businessapi.ClientWithResponses) (businessapi.Manifest, error) {
	cases := [][2]string{{"1 2\n", "3\n"}, {"40 2\n", "42\n"}, {"-5 5\n", "0\n"}}
	m := businessapi.Manifest{Kind: businessapi.ManifestKindCode,
		Limits:  businessapi.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 64},
		Checker: businessapi.Checker{Type: businessapi.CheckerTypeTolerant}}
	for i, tc := range cases {
		in, inSize, err := Upload(ctx, c, tc[0])
		if err != nil {
			return m, err
		}
		out, outSize, err := Upload(ctx, c, tc[1])
		if err != nil {
			return m, err
		}
		m.Cases = append(m.Cases, businessapi.ManifestCase{CaseId: strconv.Itoa(i + 1), InputSha256: in, InputSize: inSize,
			OutputSha256: out, OutputSize: outSize, Weight: []int64{30, 30, 40}[i]})
	}
	return m, nil
}

// BigCitiesAnswer is the accepted answer of the BigCities problem.
const BigCitiesAnswer = "SELECT name FROM city WHERE population > 1000000 ORDER BY name"

// BigCities is a SQL SELECT problem for the mysql pool (cities of more than
// a million people, ordered by name); its reference query is
// BigCitiesAnswer. It needs no uploaded test data.
func BigCities() businessapi.Manifest {
	ref := BigCitiesAnswer
	return businessapi.Manifest{Kind: businessapi.ManifestKindSql, Limits: businessapi.Limits{TimeMs: 2000, MemoryMb: 64, OutputKb: 64},
		Checker: businessapi.Checker{Type: businessapi.CheckerTypeExact}, Cases: []businessapi.ManifestCase{},
		Sql: &businessapi.SqlProblem{ProblemKind: businessapi.SqlProblemKindSelect, SchemaSql: "CREATE TABLE city (name VARCHAR(40) PRIMARY KEY, population INT NOT NULL)",
			SeedSql:      "INSERT INTO city VALUES ('Lyon', 513000), ('Paris', 2100000), ('Berlin', 3600000), ('Bonn', 330000)",
			ReferenceSql: &ref, Ordered: true, CompareColumnNames: false, Verification: []businessapi.SqlVerification{},
			StatementTimeoutMs: 2000, MaxRows: 1000, MaxBytes: 1 << 20}}
}
