package httpapi

import (
	"context"

	"github.com/kece-oj/kece/contracts/businessapi"
)

// ListLanguages serves every accepted language id with what the ready nodes
// of its pool report for it (store.Languages).
func (b businessAPI) ListLanguages(ctx context.Context, _ businessapi.ListLanguagesRequestObject) (businessapi.ListLanguagesResponseObject, error) {
	cat, err := b.s.store.Languages(ctx)
	if err != nil {
		return nil, err
	}
	out := businessapi.LanguageList{AsOf: cat.AsOf.UTC(), Languages: make([]businessapi.LanguageInfo, 0, len(cat.Languages))}
	for _, l := range cat.Languages {
		li := businessapi.LanguageInfo{Id: l.ID, Pool: businessapi.Pool(l.Pool), Standard: l.Standard,
			MinMemoryBytes: l.MinMemoryBytes, ReadyNodes: int32(l.ReadyNodes), Mixed: l.Mixed(),
			Variants: make([]businessapi.LanguageVariant, 0, len(l.Variants))}
		for _, v := range l.Variants {
			li.Variants = append(li.Variants, businessapi.LanguageVariant{Version: v.Version,
				CompileCommand: v.CompileCommand, RunCommand: v.RunCommand, EntryPoint: v.EntryPoint,
				ExtraMemoryBytes: v.ExtraMemoryBytes, Nodes: int32(v.Nodes)})
		}
		out.Languages = append(out.Languages, li)
	}
	return businessapi.ListLanguages200JSONResponse(out), nil
}
