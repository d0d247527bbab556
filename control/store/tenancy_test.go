package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/control/internal/storetest"
	"github.com/kece-oj/kece/control/manifest"
	"github.com/kece-oj/kece/control/store"
)

// settleTyped enqueues and completes one submission per id of each type and
// returns the job ids by type.
func (b *testBundle) settleTyped(t *testing.T, perType map[string]int) map[string][]int64 {
	t.Helper()
	g := b.Group(t, 64)
	sess := b.Node(t, "cpp", g.ID, 16, true)
	jobs := map[string][]int64{}
	total := 0
	for typ, n := range perType {
		for i := range n {
			r := b.Enqueue(t, typ, fmt.Sprintf("%s-%d-%d", typ, b.Seq.Add(1), i))
			jobs[typ] = append(jobs[typ], r.JobID)
			total++
		}
	}
	for done := 0; done < total; {
		got, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 16)
		require.NoError(t, err)
		for _, c := range got {
			_, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, c.JobID, c.LeaseEpoch, storetest.ACResult())
			require.NoError(t, err)
			done++
		}
	}
	return jobs
}

// businessIdentity issues a business token and returns what it
// authenticates as.
func (b *testBundle) businessIdentity(t *testing.T, spec store.TokenSpec) store.TokenIdentity {
	t.Helper()
	spec.Kind = store.TokenBusiness
	tok, err := b.Store.Tokens().IssueToken(b.Ctx, spec)
	require.NoError(t, err)
	id, err := b.Store.Tokens().AuthenticateToken(b.Ctx, store.TokenBusiness, tok)
	require.NoError(t, err)
	return id
}

// drainGroup claims and acknowledges everything scope can see with two
// racing consumers on two replicas and returns each acknowledged event's
// (job id, type), failing on an event acknowledged twice.
func (b *testBundle) drainGroup(t *testing.T, scope store.EventScope, replicas []*store.Store) map[int64]store.Event {
	t.Helper()
	var mu sync.Mutex
	acked := map[int64]store.Event{}
	var wg sync.WaitGroup
	for i, st := range replicas {
		consumer := fmt.Sprintf("backend-%d", i)
		wg.Go(func() {
			for {
				evs, err := st.Events().ClaimEvents(b.Ctx, scope, consumer, 5, time.Minute)
				if !assert.NoError(t, err) || len(evs) == 0 {
					return
				}
				ids := make([]int64, len(evs))
				for i, e := range evs {
					ids[i] = e.ID
				}
				k, err := st.Events().AckEvents(b.Ctx, scope, consumer, ids)
				if !assert.NoError(t, err) {
					return
				}
				if k != len(ids) {
					t.Errorf("%s acknowledged %d of the %d events it holds", consumer, k, len(ids))
				}
				mu.Lock()
				for _, e := range evs {
					if _, dup := acked[e.ID]; dup {
						t.Errorf("event %d acknowledged twice in group %s", e.ID, scope.Group)
					}
					acked[e.ID] = e
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return acked
}

// jobsByType lists the acknowledged events' job ids per type, failing on
// a job delivered twice within the group.
func jobsByType(t *testing.T, evs map[int64]store.Event) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	seen := map[int64]bool{}
	for _, e := range evs {
		require.False(t, seen[e.JobID], "job %d delivered twice in one group", e.JobID)
		seen[e.JobID] = true
		out[e.SubmissionType] = append(out[e.SubmissionType], e.JobID)
	}
	return out
}

func TestTokenScopeIsValidatedAndAuthenticated(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.businessIdentity(t, store.TokenSpec{Name: "algo", SubmissionTypes: []string{"DATABASE", "ALGO", "ALGO"}, ConsumerGroup: "oj-main"})
	require.Equal(t, []string{"ALGO", "DATABASE"}, id.SubmissionTypes, "sorted and distinct")
	require.Equal(t, "oj-main", id.ConsumerGroup)
	require.True(t, id.MaySee("ALGO"))
	require.False(t, id.MaySee("OTHER"))

	all := b.businessIdentity(t, store.TokenSpec{Name: "all"})
	require.Nil(t, all.SubmissionTypes, "no types: every type")
	require.Equal(t, store.DefaultConsumerGroup, all.ConsumerGroup)
	require.True(t, all.MaySee("ANYTHING"))

	for name, spec := range map[string]store.TokenSpec{
		"lowercase type": {Kind: store.TokenBusiness, Name: "a", SubmissionTypes: []string{"algo"}},
		"reserved type":  {Kind: store.TokenBusiness, Name: "b", SubmissionTypes: []string{"KECE_CHECK"}},
		"bad group":      {Kind: store.TokenBusiness, Name: "c", ConsumerGroup: "Main Group"},
		"admin scoped":   {Kind: store.TokenAdmin, Name: "d", SubmissionTypes: []string{"ALGO"}},
		"admin grouped":  {Kind: store.TokenAdmin, Name: "e", ConsumerGroup: "x"},
	} {
		_, err := b.Store.Tokens().IssueToken(b.Ctx, spec)
		require.ErrorIs(t, err, store.ErrValidation, name)
	}
	list, err := b.Store.Tokens().ListTokens(b.Ctx, store.TokenBusiness)
	require.NoError(t, err)
	require.Len(t, list, 2, "refused tokens are not stored")
	require.Equal(t, []string{"ALGO", "DATABASE"}, list[0].SubmissionTypes)
	require.Equal(t, "oj-main", list[0].ConsumerGroup)
	require.Nil(t, list[1].SubmissionTypes)
}

// Two consumer groups each receive every settlement of their types exactly
// once, whatever the other group acknowledges; the default group keeps
// receiving everything as before groups existed.
func TestConsumerGroupsEachReceiveTheirSettlementsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	algo := b.businessIdentity(t, store.TokenSpec{Name: "algo-backend", SubmissionTypes: []string{"ALGO"}, ConsumerGroup: "algo"})
	grader := b.businessIdentity(t, store.TokenSpec{Name: "grader", ConsumerGroup: "grader"})
	jobs := b.settleTyped(t, map[string]int{"ALGO": 12, "DATABASE": 7})
	replicas := []*store.Store{b.Store, b.SecondReplica(t)}

	// The all-types group first: acknowledging there must not take anything
	// from the ALGO group.
	got := jobsByType(t, b.drainGroup(t, grader.EventScope(), replicas))
	require.ElementsMatch(t, jobs["ALGO"], got["ALGO"])
	require.ElementsMatch(t, jobs["DATABASE"], got["DATABASE"])

	got = jobsByType(t, b.drainGroup(t, algo.EventScope(), replicas))
	require.ElementsMatch(t, jobs["ALGO"], got["ALGO"])
	require.Empty(t, got["DATABASE"], "the ALGO group never sees DATABASE settlements")
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE consumer_group = 'algo' AND submission_type <> 'ALGO'`),
		"no row is written for a type the group does not take")

	got = jobsByType(t, b.drainGroup(t, store.EventScope{}, replicas))
	require.Len(t, got["ALGO"], 12, "the default group still receives every settlement")
	require.Len(t, got["DATABASE"], 7)
	require.Equal(t, 0, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE state <> 'DELIVERED'`))
	require.Equal(t, 12+19+19, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`), "one row per settlement per group")
}

// Delivery state is per group: a lease running out in one group redelivers
// there only, and an acknowledgement is checked against the caller's group
// and types.
func TestGroupDeliveryStateIsIndependent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.businessIdentity(t, store.TokenSpec{Name: "a", ConsumerGroup: "ga"})
	algoOnly := b.businessIdentity(t, store.TokenSpec{Name: "b-algo", SubmissionTypes: []string{"ALGO"}, ConsumerGroup: "gb"})
	dbOnly := b.businessIdentity(t, store.TokenSpec{Name: "b-db", SubmissionTypes: []string{"DATABASE"}, ConsumerGroup: "gb"})
	b.settleTyped(t, map[string]int{"ALGO": 1, "DATABASE": 1})

	inA, err := b.Store.Events().ClaimEvents(b.Ctx, a.EventScope(), "x", 10, time.Second)
	require.NoError(t, err)
	require.Len(t, inA, 2)
	require.Equal(t, "ga", inA[0].ConsumerGroup)

	// Group gb is shared by two differently scoped tokens: each claims only
	// its own type, and cannot acknowledge the other's rows even under the
	// same consumer name.
	algoEvs, err := b.Store.Events().ClaimEvents(b.Ctx, algoOnly.EventScope(), "x", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, algoEvs, 1)
	require.Equal(t, "ALGO", algoEvs[0].SubmissionType)
	dbEvs, err := b.Store.Events().ClaimEvents(b.Ctx, dbOnly.EventScope(), "x", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, dbEvs, 1)
	require.Equal(t, "DATABASE", dbEvs[0].SubmissionType)
	out, err := b.Store.Events().AckEventsFor(b.Ctx, algoOnly.EventScope(), "x", []int64{algoEvs[0].ID, dbEvs[0].ID, inA[0].ID})
	require.NoError(t, err)
	require.Equal(t, []int64{algoEvs[0].ID}, out.Acked)
	require.ElementsMatch(t, []int64{dbEvs[0].ID, inA[0].ID}, out.NotHeld, "another type's row and another group's row are not held")

	// ga's lease runs out: ga gets its events again, gb's state is untouched.
	b.exec(t, `UPDATE judge_settlement_event SET lease_until = NOW(6) - INTERVAL 1 SECOND WHERE consumer_group = 'ga'`)
	again, err := b.Store.Events().ClaimEvents(b.Ctx, a.EventScope(), "y", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, again, 2)
	require.Equal(t, 2, again[0].DeliveryAttempt)
	none, err := b.Store.Events().ClaimEvents(b.Ctx, dbOnly.EventScope(), "z", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, none, "gb's DATABASE row is still leased to x")

	// A failed push dead-letters the row in its group only.
	require.NoError(t, b.Store.Events().FailEventDelivery(b.Ctx, a.EventScope(), "y", again[0].ID, "HTTP 500", time.Second, 2))
	dead, err := b.Store.Events().ListEventsPage(b.Ctx, store.EventFilter{State: store.EventDead})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "ga", dead[0].ConsumerGroup)
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event
		WHERE consumer_group = 'gb' AND submission_type = 'ALGO' AND state = 'DELIVERED'`), "gb's rows keep their own state")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event
		WHERE consumer_group = 'gb' AND submission_type = 'DATABASE' AND state = 'PENDING' AND consumer = 'x'`))
	onlyGa, err := b.Store.Events().ListEventsPage(b.Ctx, store.EventFilter{ConsumerGroup: "ga"})
	require.NoError(t, err)
	require.Len(t, onlyGa, 2)
}

// A group takes the union of its live tokens' types: a token joining with
// a new type widens it at once, and revoking the last token of a type stops
// new rows of that type (undelivered rows stay).
func TestGroupTypesFollowItsTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.businessIdentity(t, store.TokenSpec{Name: "one", SubmissionTypes: []string{"ALGO"}, ConsumerGroup: "g"})
	b.settleTyped(t, map[string]int{"ALGO": 1, "DATABASE": 1})
	rows := `SELECT COUNT(*) FROM judge_settlement_event WHERE consumer_group = 'g' AND submission_type = ?`
	require.Equal(t, 1, b.Count(t, rows, "ALGO"))
	require.Equal(t, 0, b.Count(t, rows, "DATABASE"))

	b.businessIdentity(t, store.TokenSpec{Name: "two", SubmissionTypes: []string{"DATABASE"}, ConsumerGroup: "g"})
	b.settleTyped(t, map[string]int{"ALGO": 1, "DATABASE": 1})
	require.Equal(t, 2, b.Count(t, rows, "ALGO"))
	require.Equal(t, 1, b.Count(t, rows, "DATABASE"))

	live, err := b.Store.Tokens().RevokeToken(b.Ctx, store.TokenBusiness, "one")
	require.NoError(t, err)
	require.True(t, live)
	b.settleTyped(t, map[string]int{"ALGO": 1, "DATABASE": 1})
	require.Equal(t, 2, b.Count(t, rows, "ALGO"), "no ALGO token left in g")
	require.Equal(t, 2, b.Count(t, rows, "DATABASE"))
	require.Equal(t, 6, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event WHERE consumer_group = 'default'`),
		"the default group takes every settlement whatever the tokens")
}

// A batched completion fans out in one statement: each settlement of the
// batch gets one row per group that takes its type, with its own payload.
func TestBatchedCompletionFansOutPerGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.businessIdentity(t, store.TokenSpec{Name: "algo", SubmissionTypes: []string{"ALGO"}, ConsumerGroup: "algo"})
	b.businessIdentity(t, store.TokenSpec{Name: "sql", SubmissionTypes: []string{"DATABASE"}, ConsumerGroup: "sql"})
	g := b.Group(t, 8)
	sess := b.Node(t, "cpp", g.ID, 8, true)
	want := map[int64]string{}
	for i, typ := range []string{"ALGO", "DATABASE", "ALGO", "OTHER"} {
		want[b.Enqueue(t, typ, fmt.Sprintf("fan-%d", i)).JobID] = typ
	}
	jobs, err := b.Store.Leases().Claim(b.Ctx, sess.NodeSession, 4)
	require.NoError(t, err)
	require.Len(t, jobs, 4)
	before := store.CommittedBatches(b.Store)
	b.Together(t, len(jobs), func(i int) {
		_, err := b.Store.Leases().Complete(b.Ctx, sess.NodeSession, jobs[i].JobID, jobs[i].LeaseEpoch, storetest.ACResult())
		assert.NoError(t, err)
	})
	require.Equal(t, before+1, store.CommittedBatches(b.Store), "the four results shared one commit")
	for id, typ := range want {
		groups := map[string]bool{"default": true, "algo": typ == "ALGO", "sql": typ == "DATABASE"}
		for group, has := range groups {
			n := b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event
				WHERE job_id = ? AND consumer_group = ? AND submission_type = ? AND payload LIKE CONCAT('%"jobId":"', ?, '"%')`,
				id, group, typ, id)
			require.Equal(t, map[bool]int{true: 1, false: 0}[has], n, "job %d (%s) in group %s", id, typ, group)
		}
	}
	require.Equal(t, 4+2+1, b.Count(t, `SELECT COUNT(*) FROM judge_settlement_event`))
}

// tenantArtifact uploads content as tenant tn and returns its digest and
// whether the upload answered "created".
func (b *testBundle) tenantArtifact(t *testing.T, tn store.Tenant, content string) (string, bool) {
	t.Helper()
	sum := sha256.Sum256([]byte(content))
	d := hex.EncodeToString(sum[:])
	created, err := b.Store.Manifests().RegisterArtifactAs(b.Ctx, tn, d, int64(len(content)))
	require.NoError(t, err)
	return d, created
}

// oneCase is a code manifest of one case.
func oneCase(in, out string, inSize, outSize int64) manifest.Manifest {
	return manifest.Manifest{Kind: manifest.KindCode,
		Limits: manifest.Limits{TimeMs: 1000, MemoryMb: 256, OutputKb: 1024}, Checker: manifest.Checker{Type: "exact"},
		Cases: []manifest.Case{{CaseID: "c1", InputSha256: in, InputSize: inSize, OutputSha256: out, OutputSize: outSize, Weight: 100}}}
}

// Test data belongs to the tenant that published it: another tenant's
// manifest reads, and is refused at enqueue, exactly like a missing one; its
// artifacts cannot be referenced; an upload of content another tenant holds
// answers as for new content. Shared (pre-tenancy) data stays usable by all.
func TestTestDataBelongsToItsPublisher(t *testing.T) {
	t.Parallel()
	b := setup(t)
	algo := b.businessIdentity(t, store.TokenSpec{Name: "algo", SubmissionTypes: []string{"ALGO"}}).Tenant()
	dbt := b.businessIdentity(t, store.TokenSpec{Name: "db", SubmissionTypes: []string{"DATABASE"}}).Tenant()
	both := b.businessIdentity(t, store.TokenSpec{Name: "both", SubmissionTypes: []string{"DATABASE", "ALGO"}}).Tenant()
	every := b.businessIdentity(t, store.TokenSpec{Name: "every"}).Tenant()

	// Uploads: "created" says only whether this tenant had the digest.
	in, created := b.tenantArtifact(t, algo, "secret input\n")
	require.True(t, created)
	out, created := b.tenantArtifact(t, algo, "secret answer\n")
	require.True(t, created)
	_, created = b.tenantArtifact(t, algo, "secret answer\n")
	require.False(t, created, "the same tenant again: already stored")
	_, created = b.tenantArtifact(t, dbt, "secret answer\n")
	require.True(t, created, "another tenant guessing the answer learns nothing: the same answer as new content")
	require.Equal(t, 1, b.Count(t, `SELECT COUNT(*) FROM judge_artifact WHERE sha256 = ?`, out), "the bytes are registered once")
	require.Equal(t, 2, b.Count(t, `SELECT COUNT(*) FROM judge_artifact_owner WHERE sha256 = ?`, out), "one row per owner")

	sizes, err := b.Store.Manifests().ArtifactSizes(b.Ctx, dbt, []string{in, out})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{out: 14}, sizes, "DATABASE sees only what it uploaded itself")

	// A manifest of ALGO: readable by ALGO, by a token holding ALGO and
	// more, and by a token of every type; DATABASE gets ErrNotFound with
	// the same words as for an id that does not exist.
	m := oneCase(in, out, 13, 14)
	pa, err := b.Store.Manifests().PublishManifestAs(b.Ctx, algo, m)
	require.NoError(t, err)
	require.True(t, pa.Created)
	for _, tn := range []store.Tenant{algo, both, every} {
		rec, err := b.Store.Manifests().ManifestRecord(b.Ctx, tn, pa.ID)
		require.NoError(t, err, "%v", tn.Types)
		require.Equal(t, pa.Digest, rec.Digest)
	}
	_, err = b.Store.Manifests().ManifestRecord(b.Ctx, dbt, pa.ID)
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, fmt.Sprintf("manifest %d: not found", pa.ID), err.Error())
	_, missing := b.Store.Manifests().ManifestRecord(b.Ctx, dbt, pa.ID+1000)
	require.Equal(t, fmt.Sprintf("manifest %d: not found", pa.ID+1000), missing.Error(), "the same words as a missing id")

	// Enqueue against it: refused for DATABASE as a missing manifest (the
	// same error as for an id that does not exist), accepted for the others.
	req := func(tn store.Tenant, typ, id string, man int64) store.EnqueueRequest {
		return store.EnqueueRequest{SubmissionType: typ, SubmissionID: id, Language: "cpp17", Source: "int main(){}", ManifestID: man, Tenant: tn}
	}
	_, err = b.Store.Jobs().Enqueue(b.Ctx, req(dbt, "DATABASE", "d1", pa.ID))
	require.ErrorIs(t, err, store.ErrManifestMissing)
	require.Contains(t, err.Error(), fmt.Sprintf("manifest %d does not exist", pa.ID))
	_, err = b.Store.Jobs().EnqueueMany(b.Ctx, []store.EnqueueRequest{req(dbt, "DATABASE", "d2", pa.ID)})
	require.ErrorIs(t, err, store.ErrManifestMissing)
	require.Zero(t, b.Count(t, `SELECT COUNT(*) FROM judge_job WHERE submission_type = 'DATABASE'`))
	for i, tn := range []store.Tenant{algo, both, every} {
		_, err := b.Store.Jobs().Enqueue(b.Ctx, req(tn, "ALGO", fmt.Sprintf("a%d", i), pa.ID))
		require.NoError(t, err, "%v", tn.Types)
	}

	// DATABASE cannot publish a manifest over ALGO's artifacts (the same
	// refusal as for digests never uploaded), but its own upload of the same
	// content makes a manifest of its own: a new id, never "already published".
	_, err = b.Store.Manifests().PublishManifestAs(b.Ctx, dbt, m)
	require.ErrorIs(t, err, store.ErrValidation)
	require.Contains(t, err.Error(), "artifact "+in+" is not uploaded")
	_, _ = b.tenantArtifact(t, dbt, "secret input\n")
	pd, err := b.Store.Manifests().PublishManifestAs(b.Ctx, dbt, m)
	require.NoError(t, err)
	require.True(t, pd.Created, "the same content from another tenant is a new manifest")
	require.NotEqual(t, pa.ID, pd.ID)
	again, err := b.Store.Manifests().PublishManifestAs(b.Ctx, algo, m)
	require.NoError(t, err)
	require.Equal(t, pa.ID, again.ID, "the same tenant again: the same manifest")
	require.False(t, again.Created)

	// A token of every type publishes for tokens of every type only.
	pe, err := b.Store.Manifests().PublishManifestAs(b.Ctx, every, m)
	require.NoError(t, err)
	_, err = b.Store.Manifests().ManifestRecord(b.Ctx, both, pe.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "narrower tokens never see what a token of every type published")
	// A token with more types publishes for tokens holding all of them.
	pb, err := b.Store.Manifests().PublishManifestAs(b.Ctx, both, oneCase(in, in, 13, 13))
	require.NoError(t, err)
	_, err = b.Store.Manifests().ManifestRecord(b.Ctx, algo, pb.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "ALGO alone may not read what ALGO+DATABASE published")

	// Shared data (the bundle's manifest, published without a tenant, like
	// everything before migration 00011) stays usable by every token.
	for i, tn := range []store.Tenant{algo, dbt, both, every} {
		_, err := b.Store.Manifests().ManifestRecord(b.Ctx, tn, b.Manifest)
		require.NoError(t, err)
		// (The store leaves the type scope to the API; the manifest is what
		// this checks.)
		_, err = b.Store.Jobs().Enqueue(b.Ctx, req(tn, "SHARED", fmt.Sprintf("s%d", i), b.Manifest))
		require.NoError(t, err)
	}
}
