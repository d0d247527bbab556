package httpapi

import (
	"github.com/kece-oj/kece/contracts/businessapi"
	"github.com/kece-oj/kece/contracts/machineapi"
	"github.com/kece-oj/kece/control/store"
)

// sourceFiles converts a submission's further files; nil when it has none
// (a one-file submission keeps its old snapshot and digest).
func sourceFiles(in *[]businessapi.SourceFile) []store.SourceFile {
	if in == nil {
		return nil
	}
	out := make([]store.SourceFile, 0, len(*in))
	for _, f := range *in {
		out = append(out, store.SourceFile{Name: f.Name, Content: f.Content})
	}
	return out
}

// wireSourceFiles hands a job's further files to the node; nil for none.
func wireSourceFiles(in []store.SourceFile) *[]machineapi.SourceFile {
	if in == nil {
		return nil
	}
	out := make([]machineapi.SourceFile, 0, len(in))
	for _, f := range in {
		out = append(out, machineapi.SourceFile{Name: f.Name, Content: f.Content})
	}
	return &out
}
