package contracts

import "embed"

// Specs holds the three OpenAPI specifications as written (admin.yaml,
// business.yaml, machine.yaml), so the control plane can serve them and
// render their docs page without a network.
//
//go:embed admin.yaml business.yaml machine.yaml
var Specs embed.FS

// SpecNames lists the embedded specifications, one per API surface.
func SpecNames() []string { return []string{"admin.yaml", "business.yaml", "machine.yaml"} }
