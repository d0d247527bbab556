package contracts_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// The protocol constants in protocol.go and the numbers machine.yaml states
// are one fact written twice; this fails when they drift apart.
func TestProtocolConstantsMatchMachineSpec(t *testing.T) {
	t.Parallel()
	raw, err := contracts.Specs.ReadFile("machine.yaml")
	require.NoError(t, err)
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	require.NoError(t, err)
	prop := func(schema, name string) *openapi3.Schema {
		t.Helper()
		s := doc.Components.Schemas[schema]
		require.NotNil(t, s, schema)
		p := s.Value.Properties[name]
		require.NotNil(t, p, "%s.%s", schema, name)
		return p.Value
	}
	maximum := func(schema, name string) float64 {
		t.Helper()
		m := prop(schema, name).Max
		require.NotNil(t, m, "%s.%s has no maximum", schema, name)
		return *m
	}
	maxItems := func(schema, name string) uint64 {
		t.Helper()
		m := prop(schema, name).MaxItems
		require.NotNil(t, m, "%s.%s has no maxItems", schema, name)
		return *m
	}

	require.Equal(t, strconv.Itoa(contracts.ProtocolVersion), doc.Info.Version, "info.version")
	waitMax := float64(contracts.ClaimWaitMax.Milliseconds())
	require.Equal(t, waitMax, maximum("ClaimRequest", "waitMs"))
	require.Equal(t, waitMax, maximum("SessionResponse", "claimWaitMaxMs"))
	require.Equal(t, float64(contracts.BatchMax), maximum("ClaimRequest", "freeSlots"))
	for _, schema := range []string{"RenewRequest", "ReleaseRequest"} {
		require.Equal(t, uint64(contracts.BatchMax), maxItems(schema, "leases"), "%s.leases", schema)
	}
	for _, f := range [][2]string{{"SessionResponse", "slots"}, {"HeartbeatRequest", "localSlots"}, {"HeartbeatRequest", "slotsBusy"},
		{"HeartbeatResponse", "slots"}} {
		require.Equal(t, float64(contracts.SlotsMax), maximum(f[0], f[1]), "%s.%s", f[0], f[1])
	}

	var enum []string
	for _, v := range doc.Components.Schemas["Pool"].Value.Enum {
		enum = append(enum, v.(string))
	}
	pools := contracts.Pools()
	require.ElementsMatch(t, enum, pools, "Pools() is the Pool enum")
	for _, p := range pools {
		require.True(t, contracts.ValidPool(p), p)
		require.True(t, machineapi.Pool(p).Valid(), p)
	}
	for _, p := range []string{"", "CPP", "rust", "cpp "} {
		require.False(t, contracts.ValidPool(p), "%q", p)
	}
	require.False(t, slices.Contains(pools, ""))
}
