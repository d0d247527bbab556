package contracts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// sample ties one JSON file under samples/ to the place in its spec it must
// match (an operation's request body, or its response for one status) and to
// the generated Go type it must decode into without losing anything.
type sample struct {
	file   string // relative to samples/
	spec   string // spec file name, e.g. machine.yaml
	method string
	path   string
	status int                       // 0: request body; else the response status
	decode func([]byte) (any, error) // strict decode into the generated type
}

// into decodes strictly (unknown fields are an error) into a fresh T.
func into[T any]() func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		var v T
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if dec.More() {
			return nil, fmt.Errorf("trailing data after the JSON value")
		}
		return &v, nil
	}
}

const (
	pJoin      = "/api/v1/internal/judgers/join"
	pSession   = "/api/v1/internal/judgers/session"
	pHeartbeat = "/api/v1/internal/judgers/heartbeat"
	pClaim     = "/api/v1/internal/judgers/jobs/claim"
	pRenew     = "/api/v1/internal/judgers/jobs/renew"
	pArtifact  = "/api/v1/internal/judgers/jobs/{jobId}/artifacts/{sha256}"
	pResult    = "/api/v1/internal/judgers/jobs/{jobId}/result"
)

func machineSamples() []sample {
	m := func(file, method, p string, status int, decode func([]byte) (any, error)) sample {
		return sample{file: "machine/" + file, spec: "machine.yaml", method: method, path: p, status: status, decode: decode}
	}
	post := http.MethodPost
	errBody := into[machineapi.Error]()
	s := []sample{
		m("join-request.json", post, pJoin, 0, into[machineapi.JoinRequest]()),
		m("join-response.json", post, pJoin, 201, into[machineapi.JoinResponse]()),
		m("session-request.json", post, pSession, 0, into[machineapi.SessionRequest]()),
		m("session-response.json", post, pSession, 200, into[machineapi.SessionResponse]()),
		m("heartbeat-request.json", post, pHeartbeat, 0, into[machineapi.HeartbeatRequest]()),
		m("heartbeat-response.json", post, pHeartbeat, 200, into[machineapi.HeartbeatResponse]()),
		m("claim-request.json", post, pClaim, 0, into[machineapi.ClaimRequest]()),
		m("claim-response-code.json", post, pClaim, 200, into[machineapi.ClaimResponse]()),
		m("claim-response-sql.json", post, pClaim, 200, into[machineapi.ClaimResponse]()),
		m("claim-response-empty.json", post, pClaim, 200, into[machineapi.ClaimResponse]()),
		m("renew-request.json", post, pRenew, 0, into[machineapi.RenewRequest]()),
		m("renew-response.json", post, pRenew, 200, into[machineapi.RenewResponse]()),
		m("result-request-error.json", post, pResult, 0, into[machineapi.ResultRequest]()),
		m("result-response-accepted.json", post, pResult, 200, into[machineapi.ResultResponse]()),
		m("result-response-already-committed.json", post, pResult, 200, into[machineapi.ResultResponse]()),
		m("error-400.json", post, pClaim, 400, errBody),
		m("error-401.json", post, pHeartbeat, 401, errBody),
		m("error-403.json", http.MethodGet, pArtifact, 403, errBody),
		m("error-404.json", http.MethodGet, pArtifact, 404, errBody),
		m("error-409.json", post, pResult, 409, errBody),
		m("error-410.json", post, pJoin, 410, errBody),
		m("error-413.json", post, pResult, 413, errBody),
		m("error-422.json", post, pResult, 422, errBody),
		m("error-429.json", post, pClaim, 429, errBody),
	}
	for _, st := range []string{"ac", "partial", "wa", "tle", "mle", "ole", "re", "ce"} {
		s = append(s, m("result-request-"+st+".json", post, pResult, 0, into[machineapi.ResultRequest]()))
	}
	return s
}

func adminSamples() []sample {
	m := func(file, method, p string, status int, decode func([]byte) (any, error)) sample {
		return sample{file: "admin/" + file, spec: "admin.yaml", method: method, path: p, status: status, decode: decode}
	}
	const (
		groups = "/api/v1/admin/judge-host-groups"
		group  = groups + "/{hostGroupId}"
		nodes  = "/api/v1/admin/judgers"
		node   = nodes + "/{nodeId}"
		jobs   = "/api/v1/admin/judge-jobs"
	)
	return []sample{
		m("host-group-create.json", http.MethodPost, groups, 0, into[adminapi.HostGroupCreate]()),
		m("host-group.json", http.MethodPost, groups, 201, into[adminapi.HostGroup]()),
		m("host-group-update.json", http.MethodPatch, group, 0, into[adminapi.HostGroupUpdate]()),
		m("error-409.json", http.MethodPatch, group, 409, into[adminapi.Error]()),
		m("judger-create.json", http.MethodPost, nodes, 0, into[adminapi.JudgerCreate]()),
		m("judger-created.json", http.MethodPost, nodes, 201, into[adminapi.JudgerCreated]()),
		m("judger-detail.json", http.MethodGet, node, 200, into[adminapi.JudgerDetail]()),
		m("disable-request.json", http.MethodPost, node+"/disable", 0, into[adminapi.DisableRequest]()),
		m("probe-result.json", http.MethodPost, node+"/probe", 200, into[adminapi.ProbeResult]()),
		m("judge-job-list.json", http.MethodGet, jobs, 200, into[adminapi.JudgeJobList]()),
		m("judge-job-detail.json", http.MethodGet, jobs+"/{jobId}", 200, into[adminapi.JudgeJobDetail]()),
		m("settlement-events-dead.json", http.MethodGet, "/api/v1/admin/settlement-events", 200, into[adminapi.SettlementEventList]()),
		m("audit-list.json", http.MethodGet, "/api/v1/admin/audit", 200, into[adminapi.AuditList]()),
		m("verdict-mix.json", http.MethodGet, "/api/v1/admin/verdict-mix", 200, into[adminapi.VerdictMix]()),
		m("reconcile-report.json", http.MethodGet, "/api/v1/admin/reconcile", 200, into[adminapi.ReconcileReport]()),
	}
}

func businessSamples() []sample {
	m := func(file, method, p string, status int, decode func([]byte) (any, error)) sample {
		return sample{file: "business/" + file, spec: "business.yaml", method: method, path: p, status: status, decode: decode}
	}
	const (
		subs = "/api/v1/submissions"
		sub  = subs + "/{submissionType}/{submissionId}"
	)
	post := http.MethodPost
	return []sample{
		m("artifact-stored.json", http.MethodPut, "/api/v1/artifacts/{sha256}", 201, into[businessapi.ArtifactStored]()),
		m("error-422.json", http.MethodPut, "/api/v1/artifacts/{sha256}", 422, into[businessapi.Error]()),
		m("manifest-code.json", post, "/api/v1/manifests", 0, into[businessapi.Manifest]()),
		m("manifest-code-testlib.json", post, "/api/v1/manifests", 0, into[businessapi.Manifest]()),
		m("manifest-sql.json", post, "/api/v1/manifests", 0, into[businessapi.Manifest]()),
		m("manifest-published.json", post, "/api/v1/manifests", 201, into[businessapi.ManifestPublished]()),
		m("manifest-stored.json", http.MethodGet, "/api/v1/manifests/{manifestId}", 200, into[businessapi.StoredManifest]()),
		m("submission-create.json", post, subs, 0, into[businessapi.SubmissionCreate]()),
		m("submission-accepted.json", post, subs, 202, into[businessapi.SubmissionAccepted]()),
		m("error-409.json", post, subs, 409, into[businessapi.Error]()),
		m("submission-status-pending.json", http.MethodGet, sub, 200, into[businessapi.SubmissionStatus]()),
		m("submission-status-judging.json", http.MethodGet, sub, 200, into[businessapi.SubmissionStatus]()),
		m("submission-status-wa.json", http.MethodGet, sub, 200, into[businessapi.SubmissionStatus]()),
		m("submission-status-partial.json", http.MethodGet, sub, 200, into[businessapi.SubmissionStatus]()),
		m("reason-request.json", post, sub+"/rejudge", 0, into[businessapi.ReasonRequest]()),
		m("event-claim-request.json", post, "/api/v1/settlement-events/claim", 0, into[businessapi.EventClaimRequest]()),
		m("event-claim-response.json", post, "/api/v1/settlement-events/claim", 200, into[businessapi.EventClaimResponse]()),
		m("event-ack-request.json", post, "/api/v1/settlement-events/ack", 0, into[businessapi.EventAckRequest]()),
		m("event-ack-response.json", post, "/api/v1/settlement-events/ack", 200, into[businessapi.EventAckResponse]()),
		m("judgers-summary.json", http.MethodGet, "/api/v1/system/judgers/summary", 200, into[businessapi.JudgersSummary]()),
	}
}

func allSamples() []sample {
	var all []sample
	all = append(all, machineSamples()...)
	all = append(all, adminSamples()...)
	all = append(all, businessSamples()...)
	return all
}

// loadSpec loads and validates one spec from disk (the source of truth).
func loadSpec(t *testing.T, name string) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(name)
	require.NoError(t, err, "load %s", name)
	require.NoError(t, doc.Validate(context.Background()), "validate %s", name)
	return doc
}

// schemaFor finds the JSON schema a sample must satisfy.
func schemaFor(t *testing.T, doc *openapi3.T, s sample) *openapi3.Schema {
	t.Helper()
	item := doc.Paths.Value(s.path)
	require.NotNil(t, item, "%s: path %s not in %s", s.file, s.path, s.spec)
	op := item.GetOperation(s.method)
	require.NotNil(t, op, "%s: no %s %s", s.file, s.method, s.path)
	var content openapi3.Content
	if s.status == 0 {
		require.NotNil(t, op.RequestBody, "%s: %s has no request body", s.file, op.OperationID)
		content = op.RequestBody.Value.Content
	} else {
		resp := op.Responses.Status(s.status)
		require.NotNil(t, resp, "%s: %s has no %d response", s.file, op.OperationID, s.status)
		content = resp.Value.Content
	}
	mt := content.Get("application/json")
	require.NotNil(t, mt, "%s: no application/json content", s.file)
	return mt.Schema.Value
}

func readSample(t *testing.T, file string) []byte {
	t.Helper()
	b, err := fs.ReadFile(contracts.Samples, path.Join("samples", file))
	require.NoError(t, err)
	return b
}

func validate(schema *openapi3.Schema, raw []byte, request bool) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors(), openapi3.EnableFormatValidation()}
	if request {
		opts = append(opts, openapi3.VisitAsRequest())
	} else {
		opts = append(opts, openapi3.VisitAsResponse())
	}
	return schema.VisitJSON(v, opts...)
}

// roundTrip decodes raw into the generated type and re-encodes it.
func roundTrip(s sample, raw []byte) ([]byte, error) {
	v, err := s.decode(raw)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return json.Marshal(v)
}

// TestSamplesMatchSpecAndTypes: every sample validates against its spec and
// survives decode → re-encode through the generated type unchanged.
func TestSamplesMatchSpecAndTypes(t *testing.T) {
	t.Parallel()
	docs := map[string]*openapi3.T{}
	for _, s := range allSamples() {
		if docs[s.spec] == nil {
			docs[s.spec] = loadSpec(t, s.spec)
		}
	}
	for _, s := range allSamples() {
		t.Run(s.file, func(t *testing.T) {
			t.Parallel()
			raw := readSample(t, s.file)
			schema := schemaFor(t, docs[s.spec], s)
			require.NoError(t, validate(schema, raw, s.status == 0))
			again, err := roundTrip(s, raw)
			require.NoError(t, err)
			require.JSONEq(t, string(raw), string(again), "decode → encode through the generated type changed the JSON")
		})
	}
}

// TestEverySampleIsChecked: a sample file nobody checks would rot silently.
func TestEverySampleIsChecked(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, s := range allSamples() {
		require.False(t, listed[s.file], "%s listed twice", s.file)
		listed[s.file] = true
	}
	var onDisk []string
	require.NoError(t, fs.WalkDir(contracts.Samples, "samples", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		onDisk = append(onDisk, strings.TrimPrefix(p, "samples/"))
		return nil
	}))
	sort.Strings(onDisk)
	for _, f := range onDisk {
		require.True(t, listed[f], "sample %s is not covered by the test table", f)
	}
	require.Len(t, onDisk, len(listed), "the table lists samples that do not exist")
}

// TestMachineSamplesCoverProtocol: each machine operation has a sample of its
// JSON request and of its success response, and the samples cover every
// verdict, lease state and disposition.
func TestMachineSamplesCoverProtocol(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t, "machine.yaml")
	have := map[string]bool{}
	for _, s := range machineSamples() {
		have[fmt.Sprintf("%s %s %d", s.method, s.path, s.status)] = true
	}
	for p, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody != nil && op.RequestBody.Value.Content.Get("application/json") != nil {
				require.True(t, have[fmt.Sprintf("%s %s 0", method, p)], "no request sample for %s", op.OperationID)
			}
			for code, resp := range op.Responses.Map() {
				if strings.HasPrefix(code, "2") && resp.Value.Content.Get("application/json") != nil {
					require.True(t, have[fmt.Sprintf("%s %s %s", method, p, code)], "no %s sample for %s", code, op.OperationID)
				}
			}
		}
	}

	statuses := map[machineapi.VerdictStatus]bool{}
	leaseStates := map[machineapi.LeaseState]bool{}
	dispositions := map[machineapi.Disposition]bool{}
	errorCodes := map[machineapi.InfraErrorCode]bool{}
	for _, s := range machineSamples() {
		v, err := s.decode(readSample(t, s.file))
		require.NoError(t, err)
		switch m := v.(type) {
		case *machineapi.ResultRequest:
			if m.Verdict != nil {
				statuses[m.Verdict.Status] = true
			}
			if m.Error != nil {
				errorCodes[m.Error.Code] = true
			}
		case *machineapi.RenewResponse:
			for _, l := range m.Leases {
				leaseStates[l.State] = true
			}
		case *machineapi.ResultResponse:
			dispositions[m.Disposition] = true
		}
	}
	for _, st := range []machineapi.VerdictStatus{
		machineapi.VerdictStatusAC, machineapi.VerdictStatusWA, machineapi.VerdictStatusTLE, machineapi.VerdictStatusMLE,
		machineapi.VerdictStatusOLE, machineapi.VerdictStatusRE, machineapi.VerdictStatusCE,
	} {
		require.True(t, statuses[st], "no result sample with verdict %s", st)
	}
	for _, st := range []machineapi.LeaseState{machineapi.LeaseStateOk, machineapi.LeaseStateLost, machineapi.LeaseStateCancelled} {
		require.True(t, leaseStates[st], "no renew sample with state %s", st)
	}
	for _, d := range []machineapi.Disposition{machineapi.DispositionAccepted, machineapi.DispositionAlreadyCommitted} {
		require.True(t, dispositions[d], "no result response sample with %s", d)
	}
	require.NotEmpty(t, errorCodes, "no result sample with an infrastructure error")
}

// TestResultSamplesAreConsistent: the result samples obey the rules the
// control plane enforces beyond the schema (outcome ↔ verdict/error, scores).
func TestResultSamplesAreConsistent(t *testing.T) {
	t.Parallel()
	for _, s := range machineSamples() {
		if !strings.HasPrefix(path.Base(s.file), "result-request-") {
			continue
		}
		v, err := s.decode(readSample(t, s.file))
		require.NoError(t, err)
		r := v.(*machineapi.ResultRequest)
		switch r.Outcome {
		case machineapi.OutcomeVerdict:
			require.NotNil(t, r.Verdict, s.file)
			require.Nil(t, r.Error, s.file)
			var sum int64
			for _, c := range r.Verdict.Cases {
				sum += scoreUnits(t, c.Score)
			}
			require.Equal(t, scoreUnits(t, r.Verdict.Score), sum, "%s: score is not the sum of case scores", s.file)
			require.LessOrEqual(t, r.Verdict.Score, float64(r.Verdict.MaxScore), s.file)
			if r.Verdict.Status == machineapi.VerdictStatusCE {
				require.Empty(t, r.Verdict.Cases, s.file)
			}
		case machineapi.OutcomeError:
			require.NotNil(t, r.Error, s.file)
			require.Nil(t, r.Verdict, s.file)
		default:
			t.Fatalf("%s: unknown outcome %q", s.file, r.Outcome)
		}
	}
}

// TestCheckerRejectsBadSamples proves the checks above can fail: each
// mutation of a good sample must be caught by the schema or the round trip.
func TestCheckerRejectsBadSamples(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t, "machine.yaml")
	find := func(file string) sample {
		for _, s := range machineSamples() {
			if s.file == file {
				return s
			}
		}
		t.Fatalf("no sample %s", file)
		return sample{}
	}
	cases := []struct {
		name, file, from, to string
	}{
		{"numeric id", "machine/join-response.json", `"nodeId": "17"`, `"nodeId": 17`},
		{"id with leading zero", "machine/join-response.json", `"nodeId": "17"`, `"nodeId": "017"`},
		{"unknown pool", "machine/join-response.json", `"pool": "cpp"`, `"pool": "rust"`},
		{"unknown field", "machine/claim-request.json", `"waitMs": 15000`, `"waitMs": 15000, "pool": "cpp"`},
		{"wait too long", "machine/claim-request.json", `"waitMs": 15000`, `"waitMs": 15001`},
		{"zero free slots", "machine/claim-request.json", `"freeSlots": 2`, `"freeSlots": 0`},
		{"lower-case verdict", "machine/result-request-ac.json", `"status": "AC",`, `"status": "ac",`},
		{"missing required", "machine/result-response-accepted.json", `, "jobState": "COMPLETED"`, ``},
		{"unknown error code", "machine/error-409.json", `"LEASE_LOST"`, `"LEASE_GONE"`},
		{"bad digest", "machine/claim-response-code.json", `"f251ddc1`, `"F251DDC1`},
		{"null rows only where allowed", "machine/claim-response-sql.json", `"columns": ["name", "dept"]`, `"columns": ["name", null]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := find(tc.file)
			raw := string(readSample(t, s.file))
			require.Contains(t, raw, tc.from, "mutation anchor missing")
			bad := []byte(strings.Replace(raw, tc.from, tc.to, 1))
			schemaErr := validate(schemaFor(t, doc, s), bad, s.status == 0)
			again, rtErr := roundTrip(s, bad)
			caught := schemaErr != nil || rtErr != nil || !jsonEqual(t, bad, again)
			require.True(t, caught, "mutation %q was not caught", tc.name)
			require.Error(t, schemaErr, "schema must refuse %q", tc.name)
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	require.NoError(t, json.Unmarshal(a, &x))
	require.NoError(t, json.Unmarshal(b, &y))
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestEmbeddedSpecsAreCurrent: the spec embedded in each generated package is
// the one on disk (catches a forgotten `make generate`).
func TestEmbeddedSpecsAreCurrent(t *testing.T) {
	t.Parallel()
	for name, embedded := range map[string]func() (*openapi3.T, error){
		"machine.yaml":  machineapi.GetSpec,
		"admin.yaml":    adminapi.GetSpec,
		"business.yaml": businessapi.GetSpec,
	} {
		onDisk := loadSpec(t, name)
		got, err := embedded()
		require.NoError(t, err)
		a, err := json.Marshal(onDisk)
		require.NoError(t, err)
		b, err := json.Marshal(got)
		require.NoError(t, err)
		require.JSONEq(t, string(a), string(b), "%s: embedded spec is stale; run make generate", name)
	}
}

// TestSharedSchemasAgree: the specs are self-contained, so small shared
// schemas are duplicated; the copies must stay identical.
func TestSharedSchemasAgree(t *testing.T) {
	t.Parallel()
	specs := map[string]*openapi3.T{
		"machine.yaml":  loadSpec(t, "machine.yaml"),
		"admin.yaml":    loadSpec(t, "admin.yaml"),
		"business.yaml": loadSpec(t, "business.yaml"),
	}
	shared := map[string]int{}
	for _, doc := range specs {
		for name := range doc.Components.Schemas {
			shared[name]++
		}
	}
	// Error and ErrorCode differ on purpose: each surface has its own codes.
	delete(shared, "Error")
	delete(shared, "ErrorCode")
	checked := 0
	for name, n := range shared {
		if n < 2 {
			continue
		}
		var first []byte
		var firstSpec string
		for specName, doc := range specs {
			ref := doc.Components.Schemas[name]
			if ref == nil {
				continue
			}
			b, err := json.Marshal(ref.Value)
			require.NoError(t, err)
			if first == nil {
				first, firstSpec = b, specName
				continue
			}
			require.JSONEq(t, string(first), string(b), "schema %s differs between %s and %s", name, firstSpec, specName)
		}
		checked++
	}
	require.GreaterOrEqual(t, checked, 15, "expected the manifest and verdict schemas to be shared")
}

// scoreUnits is a sample's score in whole 1/ScoreScale units; a score with
// more decimals is a broken sample.
func scoreUnits(t *testing.T, score float64) int64 {
	t.Helper()
	x := score * contracts.ScoreScale
	require.InDelta(t, math.Round(x), x, 1e-6, "score %v is not a multiple of 1/%d", score, contracts.ScoreScale)
	return int64(math.Round(x))
}
