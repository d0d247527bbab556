// Package deploy holds the operator-facing files: systemd units
// (deploy/systemd), Compose projects (deploy/compose), environment examples
// (deploy/control, deploy/systemd, deploy/compose/node), the nginx reverse
// proxy (deploy/nginx) and the Dockerfiles of the two binaries
// (deploy/docker). deploy/images (sandbox runtime images) and deploy/node
// (the node engineer's env example) live beside them.
//
// Its only Go code is a test that keeps these files consistent with the
// binaries: every environment variable an example names is one the binary
// reads and every variable the binary reads is documented; units, Compose
// files and the proxy carry the keys the operations guide
// (docs/operations.md) relies on. It imports nothing at run time.
package deploy
