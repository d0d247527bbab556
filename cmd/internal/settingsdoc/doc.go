// Package settingsdoc holds the test that writes docs/settings.md, the
// table of every setting of kece-control, kece-node and kecectl: it builds
// the three binaries, walks every command through its --help (the flags
// with the variables the settings loader appends to their usage, and the
// defaults cobra prints) and renders one table per command, plus the names
// several binaries share. It fails when the file is out of date;
//
//	go test ./cmd/internal/settingsdoc -update
//
// rewrites it.
package settingsdoc
