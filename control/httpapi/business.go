package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/artifact"
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
	"github.com/kece-oj/kece/control/webhook"
)

// The business API (contracts/business.yaml): artifacts, manifests,
// submissions, settlement events and the public summary. Handlers translate
// wire types to control/store calls; the pool follows from the language and
// the limits from the manifest — the request never names either.

// declaredSizeKey carries the upload's Content-Length to UploadArtifact,
// which the strict request object does not expose.
const declaredSizeKey ctxKey = 100

// declaredSize is a strict middleware that records the request's
// Content-Length (-1 when not declared) for UploadArtifact.
func declaredSize(f businessapi.StrictHandlerFunc, operationID string) businessapi.StrictHandlerFunc {
	if operationID != "UploadArtifact" {
		return f
	}
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		return f(context.WithValue(ctx, declaredSizeKey, r.ContentLength), w, r, req)
	}
}

// fieldErr is a 422 with a specific code naming the offending field.
func fieldErr(code, field string, cause error) *Error {
	e := apiErr(http.StatusUnprocessableEntity, code, cause)
	if field != "" {
		e.Details = map[string]any{"field": field}
	}
	return e
}

// UploadArtifact streams the body into the artifact store, which hashes and
// counts it while writing and publishes it only if digest and size match,
// then registers it for the caller's tenant. The body is always read and
// verified; the answer is 200 only when the same tenant uploaded the digest
// before, so it never tells whether another tenant holds the content.
func (b businessAPI) UploadArtifact(ctx context.Context, req businessapi.UploadArtifactRequestObject) (businessapi.UploadArtifactResponseObject, error) {
	size := artifact.SizeUnknown
	if n, ok := ctx.Value(declaredSizeKey).(int64); ok && n >= 0 {
		size = n
	}
	created, err := b.s.artifacts.Put(ctx, req.Sha256, size, req.Body)
	if err != nil {
		return nil, uploadError(err)
	}
	n, err := b.s.artifacts.Stat(req.Sha256)
	if err != nil {
		return nil, fmt.Errorf("artifact %s: stat after upload: %w", req.Sha256, err)
	}
	owned, err := b.s.store.Manifests().RegisterArtifactAs(ctx, tokenFrom(ctx).Tenant(), req.Sha256, n)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fieldErr(codeArtifactSizeMismatch, "sha256", err)
		}
		return nil, err
	}
	if created {
		b.s.log.InfoContext(ctx, "artifact stored", "sha256", req.Sha256, "size", n)
	}
	if owned {
		return businessapi.UploadArtifact201JSONResponse{Sha256: req.Sha256, Size: n}, nil
	}
	return businessapi.UploadArtifact200JSONResponse{Sha256: req.Sha256, Size: n}, nil
}

func uploadError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), errors.Is(err, artifact.ErrTooLarge):
		return apiErr(http.StatusRequestEntityTooLarge, codePayloadTooLarge, err)
	case errors.Is(err, artifact.ErrDigestMismatch):
		return fieldErr(codeDigestMismatch, "sha256", err)
	case errors.Is(err, artifact.ErrSizeMismatch):
		return fieldErr(codeArtifactSizeMismatch, "body", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The body ended before its declared Content-Length.
		return fieldErr(codeArtifactSizeMismatch, "body", fmt.Errorf("body shorter than its Content-Length: %w", err))
	case errors.Is(err, artifact.ErrInvalid):
		return apiErr(http.StatusBadRequest, codeRequestInvalid, err)
	}
	return err
}

// PublishManifest validates a manifest (shape, limits, checker, and every
// referenced artifact uploaded by the caller's tenant with the stated size)
// and stores it for that tenant, content-addressed: the same content from
// the same tenant answers 200 with the same id.
func (b businessAPI) PublishManifest(ctx context.Context, req businessapi.PublishManifestRequestObject) (businessapi.PublishManifestResponseObject, error) {
	// The control plane's manifest type has the contract's JSON shape.
	raw, err := json.Marshal(req.Body)
	if err != nil {
		return nil, fmt.Errorf("manifest: encode: %w", err)
	}
	m, err := manifest.Parse(raw)
	if err == nil {
		err = m.ValidateNew()
	}
	if err != nil {
		var me *manifest.Error
		if errors.As(err, &me) {
			return nil, fieldErr(codeManifestInvalid, me.Field, err)
		}
		return nil, fieldErr(codeManifestInvalid, "", err)
	}
	if err := b.checkArtifacts(ctx, m); err != nil {
		return nil, err
	}
	p, err := b.s.store.Manifests().PublishManifestAs(ctx, tokenFrom(ctx).Tenant(), m)
	if err != nil {
		var ve *store.ValidationError
		if errors.As(err, &ve) {
			// An artifact check the pre-check above did not see (it cannot
			// change in between: artifacts are never deleted).
			return nil, fieldErr(codeManifestInvalid, ve.Field, err)
		}
		return nil, err
	}
	if p.Created {
		b.s.log.InfoContext(ctx, "manifest published", "manifest_id", p.ID, "digest", p.Digest)
		return businessapi.PublishManifest201JSONResponse{ManifestId: idString(p.ID), Digest: p.Digest}, nil
	}
	return businessapi.PublishManifest200JSONResponse{ManifestId: idString(p.ID), Digest: p.Digest}, nil
}

// checkArtifacts names the first field whose digest is not uploaded (by an
// owner the caller may use: another tenant's upload reads as missing) or
// whose size differs from the uploaded file.
func (b businessAPI) checkArtifacts(ctx context.Context, m manifest.Manifest) error {
	type ref struct {
		field, digest string
		size          int64
	}
	var refs []ref
	for i, c := range m.Cases {
		refs = append(refs,
			ref{fmt.Sprintf("cases[%d].inputSha256", i), c.InputSha256, c.InputSize},
			ref{fmt.Sprintf("cases[%d].outputSha256", i), c.OutputSha256, c.OutputSize})
	}
	if sp := m.Checker.Special; sp != nil {
		refs = append(refs, ref{"checker.special.sourceSha256", sp.SourceSha256, sp.SourceSize})
		for i, f := range sp.Files {
			refs = append(refs, ref{fmt.Sprintf("checker.special.files[%d].sha256", i), f.Sha256, f.Size})
		}
	}
	if m.Grader != nil {
		for i, gl := range m.Grader.Languages {
			for k, f := range gl.Files {
				refs = append(refs, ref{fmt.Sprintf("grader.languages[%d].files[%d].sha256", i, k), f.Sha256, f.Size})
			}
		}
	}
	if len(refs) == 0 {
		return nil
	}
	digests := make([]string, 0, len(refs))
	for _, r := range refs {
		digests = append(digests, r.digest)
	}
	have, err := b.s.store.Manifests().ArtifactSizes(ctx, tokenFrom(ctx).Tenant(), digests)
	if err != nil {
		return err
	}
	for _, r := range refs {
		n, ok := have[r.digest]
		if !ok {
			return fieldErr(codeArtifactMissing, r.field, fmt.Errorf("artifact %s is not uploaded", r.digest))
		}
		if n != r.size {
			return fieldErr(codeArtifactSizeMismatch, r.field,
				fmt.Errorf("artifact %s has %d bytes, the manifest says %d", r.digest, n, r.size))
		}
	}
	return nil
}

// GetManifest returns a published manifest the caller may use; another
// tenant's answers 404 MANIFEST_NOT_FOUND, as a missing one.
func (b businessAPI) GetManifest(ctx context.Context, req businessapi.GetManifestRequestObject) (businessapi.GetManifestResponseObject, error) {
	id, err := parseID("manifestId", req.ManifestId)
	if err != nil {
		return nil, err
	}
	rec, err := b.s.store.Manifests().ManifestRecord(ctx, tokenFrom(ctx).Tenant(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiErr(http.StatusNotFound, codeManifestNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(rec.Manifest)
	if err != nil {
		return nil, fmt.Errorf("manifest %d: %w", id, err)
	}
	var wire businessapi.Manifest
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, fmt.Errorf("manifest %d: %w", id, err)
	}
	return businessapi.GetManifest200JSONResponse{ManifestId: idString(rec.ID), Digest: rec.Digest,
		CreatedAt: rec.CreatedAt.UTC(), Manifest: wire}, nil
}

// EnqueueSubmission accepts a submission. The pool comes from the language
// table and the limits from the manifest. With an Idempotency-Key (scoped to
// the calling token) a retried request gets the same receipt.
func (b businessAPI) EnqueueSubmission(ctx context.Context, req businessapi.EnqueueSubmissionRequestObject) (businessapi.EnqueueSubmissionResponseObject, error) {
	body := req.Body
	if store.IsReservedType(body.SubmissionType) {
		return nil, fieldErr(codeRequestInvalid, "submissionType", errors.New("submission types starting with KECE_ are reserved"))
	}
	if err := mayEnqueue(tokenFrom(ctx), body.SubmissionType); err != nil {
		return nil, err
	}
	manID, err := parseID("manifestId", body.ManifestId)
	if err != nil {
		return nil, err
	}
	sreq := store.EnqueueRequest{SubmissionType: body.SubmissionType, SubmissionID: body.SubmissionId,
		Language: body.Language, Source: body.Source, Files: sourceFiles(body.Files), ManifestID: manID, Tenant: tokenFrom(ctx).Tenant()}
	if body.Priority != nil {
		sreq.Priority = int(*body.Priority)
	}
	key := ""
	if req.Params.IdempotencyKey != nil {
		key = *req.Params.IdempotencyKey
	}
	res, err := b.s.store.Jobs().EnqueueIdempotent(ctx, tokenFrom(ctx).ID, key, sreq)
	if err != nil {
		return nil, enqueueErr(err)
	}
	acc, err := b.accepted(ctx, res, sreq)
	if err != nil {
		return nil, err
	}
	return businessapi.EnqueueSubmission202JSONResponse(acc), nil
}

// enqueueErr gives an enqueue refusal its specific code (the language, the
// manifest, the memory limit, a reused key); other errors are classified as
// usual.
func enqueueErr(err error) error {
	switch {
	case errors.Is(err, store.ErrUnknownLanguage):
		return fieldErr(codeLanguageUnsupported, "language", err)
	case errors.Is(err, store.ErrManifestMissing):
		return fieldErr(codeManifestNotFound, "manifestId", err)
	case errors.Is(err, store.ErrManifestMismatch):
		return fieldErr(codeManifestLanguageMismatch, "language", err)
	case errors.Is(err, store.ErrMemoryTooLow):
		return fieldErr(codeMemoryLimitTooLow, "limits.memoryMb", err)
	case errors.Is(err, store.ErrIdempotencyKeyReused):
		return apiErr(http.StatusConflict, codeIdempotencyKeyReused, err)
	}
	return err
}

// accepted is the receipt of one enqueued submission: PENDING when this
// request created the job, else the existing job's status now.
func (b businessAPI) accepted(ctx context.Context, res store.EnqueueResult, req store.EnqueueRequest) (businessapi.SubmissionAccepted, error) {
	status := businessapi.SubmissionStatusCodePending
	if !res.Created {
		j, err := b.s.store.Jobs().GetJob(ctx, res.JobID)
		if err != nil {
			return businessapi.SubmissionAccepted{}, err
		}
		word, _ := j.BusinessStatus()
		status = businessapi.SubmissionStatusCode(word)
	} else {
		b.s.log.InfoContext(ctx, "submission enqueued", "job_id", res.JobID, "language", req.Language,
			"submission_type", req.SubmissionType, "submission_id", req.SubmissionID)
	}
	return businessapi.SubmissionAccepted{JobId: idString(res.JobID), Generation: int64(res.Generation), Status: status}, nil
}

// bulkItemError is one entry of details.items of a refused bulk enqueue
// (contracts/business.yaml, EnqueueSubmissions).
type bulkItemError struct {
	Index   int    `json:"index"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// EnqueueSubmissions accepts many submissions in one transaction, all or
// none. Every item is checked before anything is written and all invalid
// items are reported together, each with its own code.
func (b businessAPI) EnqueueSubmissions(ctx context.Context, req businessapi.EnqueueSubmissionsRequestObject) (businessapi.EnqueueSubmissionsResponseObject, error) {
	// The contract bounds the item count (1..EnqueueManyMax), and the
	// store checks it again.
	items := req.Body.Submissions
	// A type the token may not use refuses the whole request, as a single
	// enqueue of that item would be refused: 403 naming the item.
	tok := tokenFrom(ctx)
	for i, it := range items {
		if err := mayEnqueue(tok, it.SubmissionType); err != nil {
			var e *Error
			if errors.As(err, &e) {
				e.Details["index"] = i
			}
			return nil, err
		}
	}
	reqs := make([]store.EnqueueRequest, len(items))
	var bad []bulkItemError
	for i, it := range items {
		// What the handler checks itself (id syntax) is reported with the
		// store's per-item checks (reserved types among them), in one list.
		manID, err := parseID("manifestId", it.ManifestId)
		if err != nil {
			bad = append(bad, bulkItemError{Index: i, Code: codeRequestInvalid, Field: "manifestId", Message: err.Error()})
			continue
		}
		reqs[i] = store.EnqueueRequest{SubmissionType: it.SubmissionType, SubmissionID: it.SubmissionId,
			Language: it.Language, Source: it.Source, Files: sourceFiles(it.Files), ManifestID: manID, Tenant: tok.Tenant()}
		if it.Priority != nil {
			reqs[i].Priority = int(*it.Priority)
		}
	}
	if len(bad) > 0 {
		// Report the store's findings on the other items too, so one
		// answer lists every invalid item.
		var idx []int
		var rest []store.EnqueueRequest
		for i := range reqs {
			if !slices.ContainsFunc(bad, func(e bulkItemError) bool { return e.Index == i }) {
				idx = append(idx, i)
				rest = append(rest, reqs[i])
			}
		}
		if len(rest) > 0 {
			var be *store.BulkError
			if err := b.s.store.Jobs().ValidateEnqueueMany(ctx, rest); errors.As(err, &be) {
				for _, it := range be.Items {
					bad = append(bad, bulkItem(idx[it.Index], it.Err))
				}
			} else if err != nil {
				return nil, err
			}
		}
		slices.SortFunc(bad, func(a, b bulkItemError) int { return cmp.Compare(a.Index, b.Index) })
		return nil, bulkInvalid(bad)
	}
	key := ""
	if req.Params.IdempotencyKey != nil {
		key = *req.Params.IdempotencyKey
	}
	res, err := b.s.store.Jobs().EnqueueManyIdempotent(ctx, tokenFrom(ctx).ID, key, reqs)
	var be *store.BulkError
	var ie *store.ItemError
	switch {
	case errors.As(err, &be):
		for _, it := range be.Items {
			bad = append(bad, bulkItem(it.Index, it.Err))
		}
		return nil, bulkInvalid(bad)
	case errors.As(err, &ie):
		e := classify(enqueueErr(ie.Err), surfaceBusiness)
		e.Message = ie.Error()
		e.Details = map[string]any{"index": ie.Index}
		return nil, e
	case err != nil:
		return nil, enqueueErr(err)
	}
	out := businessapi.EnqueueSubmissions202JSONResponse{Submissions: make([]businessapi.SubmissionAccepted, len(res))}
	for i, r := range res {
		if out.Submissions[i], err = b.accepted(ctx, r, reqs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bulkItem is the entry of one item the store refused, with the code a
// single enqueue of it would get.
func bulkItem(index int, err error) bulkItemError {
	e := classify(enqueueErr(err), surfaceBusiness)
	field, _ := e.Details["field"].(string)
	return bulkItemError{Index: index, Code: e.Code, Field: field, Message: e.Message}
}

// bulkInvalid is the 422 of a bulk enqueue with invalid items.
func bulkInvalid(items []bulkItemError) *Error {
	e := apiErr(http.StatusUnprocessableEntity, codeRequestInvalid,
		fmt.Errorf("%d of the submissions are invalid; details.items lists each (index, code, field, message)", len(items)))
	e.Details = map[string]any{"items": items}
	return e
}

// mayEnqueue refuses a submission type the token is not scoped to with 403
// SUBMISSION_TYPE_FORBIDDEN: the caller named the type itself, so saying so
// leaks nothing, and the code tells the operator which token to fix.
func mayEnqueue(tok store.TokenIdentity, typ string) error {
	if tok.MaySee(typ) {
		return nil
	}
	e := apiErr(http.StatusForbidden, codeSubmissionTypeForbidden,
		fmt.Errorf("business token %q may not use submission type %s (its types: %s)", tok.Name, typ, strings.Join(tok.SubmissionTypes, ", ")))
	e.Details = map[string]any{"field": "submissionType"}
	return e
}

// hiddenSubmission answers 404 SUBMISSION_NOT_FOUND for a submission the
// caller may not address (a reserved type, or a type outside its token's
// scope) exactly as for one that does not exist, so a token cannot learn
// which submissions of other types exist.
func hiddenSubmission(ctx context.Context, typ string) error {
	if store.IsReservedType(typ) || !tokenFrom(ctx).MaySee(typ) {
		return apiErr(http.StatusNotFound, codeSubmissionNotFound, errors.New("no such submission"))
	}
	return nil
}

// GetSubmission reads the submission's current generation through its
// pointer; with waitMs it waits for that generation to settle (status_wait.go).
func (b businessAPI) GetSubmission(ctx context.Context, req businessapi.GetSubmissionRequestObject) (businessapi.GetSubmissionResponseObject, error) {
	var wait time.Duration
	if req.Params.WaitMs != nil {
		wait = time.Duration(*req.Params.WaitMs) * time.Millisecond
	}
	st, err := b.waitSubmissionStatus(ctx, req.SubmissionType, req.SubmissionId, wait)
	if err != nil {
		return nil, err
	}
	return businessapi.GetSubmission200JSONResponse(st), nil
}

func (b businessAPI) submissionStatus(ctx context.Context, typ, id string) (businessapi.SubmissionStatus, error) {
	if err := hiddenSubmission(ctx, typ); err != nil {
		return businessapi.SubmissionStatus{}, err
	}
	st, err := b.s.store.Jobs().SubmissionStatus(ctx, typ, id)
	if errors.Is(err, store.ErrNotFound) {
		return businessapi.SubmissionStatus{}, apiErr(http.StatusNotFound, codeSubmissionNotFound, err)
	}
	if err != nil {
		return businessapi.SubmissionStatus{}, err
	}
	out := businessapi.SubmissionStatus{SubmissionType: typ, SubmissionId: id, JobId: idString(st.JobID),
		Generation: int64(st.Generation), Status: businessapi.SubmissionStatusCode(st.Status),
		StatusVersion: st.StatusVersion, CasesDone: int32(st.CasesDone), CasesTotal: int32(st.CasesTotal),
		UpdatedAt: st.UpdatedAt.UTC()}
	if st.WaitReason != "" {
		w := businessapi.WaitReason(st.WaitReason)
		out.WaitReason = &w
	}
	switch {
	case out.Status == businessapi.SubmissionStatusCodeSystemError || out.WaitReason != nil && *out.WaitReason == businessapi.WaitReasonRetryBackoff:
		j, err := b.s.store.Jobs().GetJob(ctx, st.JobID)
		if err != nil {
			return businessapi.SubmissionStatus{}, err
		}
		if j.LastErrorCode != "" {
			code := j.LastErrorCode
			out.ErrorCode = &code
		}
	case isVerdict(out.Status):
		if out.Verdict, err = webhook.WireVerdict(st.Result); err != nil {
			return businessapi.SubmissionStatus{}, fmt.Errorf("job %d: %w", st.JobID, err)
		}
	}
	return out, nil
}

// isVerdict: the status words that are verdicts (AC, PARTIAL, WA, …), by
// the contract's VerdictStatus enum so a new verdict needs no edit here.
func isVerdict(s businessapi.SubmissionStatusCode) bool {
	return businessapi.VerdictStatus(s).Valid()
}

// RejudgeSubmission queues generation+1 and cancels a still live older job.
func (b businessAPI) RejudgeSubmission(ctx context.Context, req businessapi.RejudgeSubmissionRequestObject) (businessapi.RejudgeSubmissionResponseObject, error) {
	if err := hiddenSubmission(ctx, req.SubmissionType); err != nil {
		return nil, err
	}
	res, err := b.s.store.Jobs().Rejudge(ctx, req.SubmissionType, req.SubmissionId, tokenFrom(ctx).Actor(), req.Body.Reason)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiErr(http.StatusNotFound, codeSubmissionNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	b.s.log.InfoContext(ctx, "submission rejudged", "job_id", res.JobID, "generation", res.Generation,
		"submission_type", req.SubmissionType, "submission_id", req.SubmissionId)
	return businessapi.RejudgeSubmission202JSONResponse{JobId: idString(res.JobID), Generation: int64(res.Generation),
		Status: businessapi.SubmissionStatusCodePending}, nil
}

// CancelSubmission cancels the current job unless it already has an
// outcome; cancelling a cancelled submission answers 200 again.
func (b businessAPI) CancelSubmission(ctx context.Context, req businessapi.CancelSubmissionRequestObject) (businessapi.CancelSubmissionResponseObject, error) {
	if err := hiddenSubmission(ctx, req.SubmissionType); err != nil {
		return nil, err
	}
	state, err := b.s.store.Jobs().Cancel(ctx, req.SubmissionType, req.SubmissionId, tokenFrom(ctx).Actor(), req.Body.Reason)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiErr(http.StatusNotFound, codeSubmissionNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	if state != store.StateCancelled {
		return nil, apiErr(http.StatusConflict, codeSubmissionTerminal,
			fmt.Errorf("submission %s/%s already ended (%s)", req.SubmissionType, req.SubmissionId, state))
	}
	// The store woke the job's waiting status reads (control/internal/jobdb/wakeups.go).
	st, err := b.submissionStatus(ctx, req.SubmissionType, req.SubmissionId)
	if err != nil {
		return nil, err
	}
	return businessapi.CancelSubmission200JSONResponse(st), nil
}

// ClaimSettlementEvents leases a batch of pending events to the consumer:
// events of the calling token's consumer group, of the types it may see.
func (b businessAPI) ClaimSettlementEvents(ctx context.Context, req businessapi.ClaimSettlementEventsRequestObject) (businessapi.ClaimSettlementEventsResponseObject, error) {
	events, err := b.s.store.Events().ClaimEvents(ctx, tokenFrom(ctx).EventScope(), req.Body.Consumer, int(req.Body.Max), time.Duration(req.Body.LeaseMs)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	out := make([]businessapi.SettlementEvent, 0, len(events))
	for _, e := range events {
		w, err := webhook.WireEvent(e)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return businessapi.ClaimSettlementEvents200JSONResponse{Events: out}, nil
}

// AckSettlementEvents marks applied events delivered; events this consumer
// no longer holds are listed in notHeld.
func (b businessAPI) AckSettlementEvents(ctx context.Context, req businessapi.AckSettlementEventsRequestObject) (businessapi.AckSettlementEventsResponseObject, error) {
	ids := make([]int64, 0, len(req.Body.EventIds))
	for _, s := range req.Body.EventIds {
		id, err := parseID("eventIds", s)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	res, err := b.s.store.Events().AckEventsFor(ctx, tokenFrom(ctx).EventScope(), req.Body.Consumer, ids)
	if err != nil {
		return nil, err
	}
	return businessapi.AckSettlementEvents200JSONResponse{Acked: idStrings(res.Acked), NotHeld: idStrings(res.NotHeld)}, nil
}

func idStrings(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatInt(id, 10)
	}
	return out
}

// GetJudgersSummary is the public snapshot: database clock, per-pool ready
// nodes and queued submissions; no names, addresses or credentials.
func (b businessAPI) GetJudgersSummary(ctx context.Context, _ businessapi.GetJudgersSummaryRequestObject) (businessapi.GetJudgersSummaryResponseObject, error) {
	sum, err := b.s.store.Summary(ctx)
	if err != nil {
		return nil, err
	}
	out := businessapi.GetJudgersSummary200JSONResponse{AsOf: sum.AsOf.UTC(), ReadyPools: int32(sum.ReadyPools),
		TotalPools: int32(sum.TotalPools), Pools: make([]businessapi.PoolSummary, 0, len(sum.Pools))}
	switch {
	case sum.Freshness == nil:
		out.Freshness.State = businessapi.FreshnessStateNoHeartbeats
	default:
		age := max(sum.Freshness.Milliseconds(), 0)
		out.Freshness.NewestHeartbeatAgeMs = &age
		out.Freshness.State = businessapi.FreshnessStateLive
		if *sum.Freshness > b.s.store.Config().OfflineAfter {
			out.Freshness.State = businessapi.FreshnessStateStale
		}
	}
	for _, p := range sum.Pools {
		ps := businessapi.PoolSummary{Pool: businessapi.Pool(p.Pool), ReadyNodes: int32(p.ReadyNodes),
			QueuedSubmissions: int64(p.QueuedSubmissions), OldestWaitMs: p.OldestWait.Milliseconds(),
			UnrunnableSubmissions: int64(p.Unrunnable), MissingCapabilities: append([]string{}, p.Missing...)}
		if p.WaitReason != "" {
			w := businessapi.PoolWaitReason(p.WaitReason)
			ps.WaitReason = &w
		}
		out.Pools = append(out.Pools, ps)
	}
	return out, nil
}
