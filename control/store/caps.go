package store

import (
	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/control/internal/jobdb"
)

// reportedCaps turns a heartbeat's reports into the columns to store (nil:
// not reported, keep the stored value).
func reportedCaps(langs []LanguageReport, features []string) (languages, feats *uint64, err error) {
	if langs != nil {
		ids := make([]string, len(langs))
		for i, l := range langs {
			ids[i] = l.ID
		}
		m := contracts.LanguageCaps(ids)
		languages = &m
	}
	if features != nil {
		if len(features) > 32 {
			return nil, nil, jobdb.Invalid("features", "at most 32 problem types")
		}
		m, err := contracts.FeatureCaps(features)
		if err != nil {
			return nil, nil, jobdb.Invalid("features", "%v", err)
		}
		feats = &m
	}
	return languages, feats, nil
}
