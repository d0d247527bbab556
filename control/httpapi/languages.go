package httpapi

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/kece-oj/kece/contracts/adminapi"
	"github.com/kece-oj/kece/contracts/businessapi"
)

// ListLanguages serves every accepted language id with what the ready nodes
// of its pool report for it (store.Languages).
func (b businessAPI) ListLanguages(ctx context.Context, _ businessapi.ListLanguagesRequestObject) (businessapi.ListLanguagesResponseObject, error) {
	out, err := b.s.languages(ctx)
	if err != nil {
		return nil, err
	}
	return businessapi.ListLanguages200JSONResponse(out), nil
}

// ListLanguages serves the admin surface the same catalog; the two contracts
// declare the same JSON shape.
func (a fleetAdmin) ListLanguages(ctx context.Context, _ adminapi.ListLanguagesRequestObject) (adminapi.ListLanguagesResponseObject, error) {
	out, err := a.s.languages(ctx)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("languages: %w", err)
	}
	var wire adminapi.LanguageList
	if err := json.Unmarshal(b, &wire); err != nil {
		return nil, fmt.Errorf("languages: %w", err)
	}
	return adminapi.ListLanguages200JSONResponse(wire), nil
}

func (s *Server) languages(ctx context.Context) (businessapi.LanguageList, error) {
	cat, err := s.store.Nodes().Languages(ctx)
	if err != nil {
		return businessapi.LanguageList{}, err
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
	return out, nil
}
