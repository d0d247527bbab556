package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// Interactive and communication manifests are published through the
// business API (refused with the field to fix when incomplete or combined
// with file I/O), read back unchanged, and reach a claiming node with the
// interactor's or manager's fields.
func TestInteractiveManifestsOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBiz(t)
	ctx, c := b.env.Ctx, b.c
	src := []byte("int main(){}\n// interactor\n")
	sum := upload(t, c, src)
	timeMs, procs, in := int64(2000), 2, "a.in"
	interactive := func() businessapi.Manifest {
		m := codeManifest(t, c, "100 37\n", "")
		m.Checker = businessapi.Checker{Type: businessapi.CheckerTypeInteractive, Special: &businessapi.SpecialChecker{
			Language: "cpp17", SourceSha256: sum, SourceSize: int64(len(src)), TimeMs: &timeMs}}
		return m
	}
	for _, tc := range []struct {
		name  string
		mut   func(m *businessapi.Manifest)
		field string
	}{
		{"with an input file", func(m *businessapi.Manifest) { m.Io = &businessapi.FileIO{InputFile: &in} }, "io"},
		{"processes on an interactor", func(m *businessapi.Manifest) { m.Checker.Special.Processes = &procs }, "checker.special.processes"},
		{"communication without processes", func(m *businessapi.Manifest) { m.Checker.Type = businessapi.CheckerTypeCommunication }, "checker.special.processes"},
		{"time limit on a special checker", func(m *businessapi.Manifest) { m.Checker.Type = businessapi.CheckerTypeSpecial }, "checker.special.timeMs"},
	} {
		m := interactive()
		tc.mut(&m)
		r, err := c.PublishManifestWithResponse(ctx, m)
		require.NoError(t, err)
		conforms(t, r.HTTPResponse, r.Body)
		require.Equal(t, http.StatusUnprocessableEntity, r.StatusCode(), tc.name+": "+string(r.Body))
		code, field := apiError(t, r.Body)
		require.Equal(t, "MANIFEST_INVALID", code, tc.name)
		require.Equal(t, tc.field, field, tc.name)
	}

	m := interactive()
	interID := publish(t, c, m)
	got, err := c.GetManifestWithResponse(ctx, interID)
	require.NoError(t, err)
	require.Equal(t, m, got.JSON200.Manifest, "the interactor's fields round-trip")
	comm := interactive()
	comm.Checker.Type, comm.Checker.Special.Processes = businessapi.CheckerTypeCommunication, &procs
	commID := publish(t, c, comm)

	for i, id := range []string{interID, commID} {
		en, err := c.EnqueueSubmissionWithResponse(ctx, nil, businessapi.SubmissionCreate{SubmissionType: "ALGO",
			SubmissionId: []string{"i-1", "c-1"}[i], Language: "cpp17", Source: "int main(){}", ManifestId: id})
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, en.StatusCode(), string(en.Body))
	}
	// 5 slots: the interactive job holds 2 (the program and the
	// interactor), the communication job procs + 1 (docs/scheduling.md,
	// "Slot weights").
	n := b.env.NewNode("cpp", 5, 8)
	nc := joinAndOpen(t, b.env, n.JoinCode, "boot-interactive-1")
	b.env.ForceEnable(n.ID)
	// A node is handed these jobs only once it reports both problem types.
	reportFeatures(t, nc, machineapi.FeatureInteractive, machineapi.FeatureCommunication)
	cl, err := nc.c.ClaimJobsWithResponse(ctx, machineapi.ClaimRequest{FreeSlots: 5, WaitMs: 1000})
	require.NoError(t, err)
	require.Len(t, cl.JSON200.Jobs, 2)
	types := map[machineapi.CheckerType]*machineapi.SpecialChecker{}
	slots := map[machineapi.CheckerType]int32{}
	for _, j := range cl.JSON200.Jobs {
		types[j.Manifest.Checker.Type] = j.Manifest.Checker.Special
		slots[j.Manifest.Checker.Type] = *j.Slots
	}
	require.Equal(t, map[machineapi.CheckerType]int32{machineapi.CheckerTypeInteractive: 2,
		machineapi.CheckerTypeCommunication: int32(procs) + 1}, slots, "each answer says its slot weight")
	require.Equal(t, timeMs, *types[machineapi.CheckerTypeInteractive].TimeMs)
	require.Nil(t, types[machineapi.CheckerTypeInteractive].Processes)
	require.Equal(t, procs, *types[machineapi.CheckerTypeCommunication].Processes)
}

// reportFeatures sends a heartbeat reporting problem types, as a node of
// this version does: a node is handed only jobs whose types it reported.
func reportFeatures(t *testing.T, nc *nodeClient, features ...machineapi.Feature) {
	t.Helper()
	hb, err := nc.c.SendHeartbeatWithResponse(context.Background(), machineapi.HeartbeatRequest{RuntimeVersion: "rt",
		LocalSlots: 1, Dependencies: []machineapi.Dependency{}, Features: &features})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, hb.StatusCode(), string(hb.Body))
}
