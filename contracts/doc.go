// Package contracts holds the OpenAPI 3 specifications of KECE's three HTTP
// surfaces (the source of truth), the Go code generated from them and fixed
// JSON samples of every machine-protocol message.
//
//   - machine.yaml  → machineapi:  node ↔ control plane, /api/v1/internal/judgers/…
//   - admin.yaml    → adminapi:    operators, /api/v1/admin/…
//   - business.yaml → businessapi: business backend, /api/v1/…, and the public summary
//
// Each generated package holds models, a net/http (Go 1.22 ServeMux) server
// with a strict-server adapter, a client and the embedded spec for request
// validation. Regenerate with `make generate`; never edit *.gen.go by hand.
// This package must not import control, worker or engine.
package contracts

import "embed"

//go:generate go tool oapi-codegen -config machineapi/oapi-codegen.yaml machine.yaml
//go:generate go tool oapi-codegen -config adminapi/oapi-codegen.yaml admin.yaml
//go:generate go tool oapi-codegen -config businessapi/oapi-codegen.yaml business.yaml

// Samples holds the fixed JSON samples under samples/, for tests elsewhere
// that want a known-good message.
//
//go:embed samples
var Samples embed.FS
