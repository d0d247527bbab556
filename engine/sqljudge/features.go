package sqljudge

import "github.com/kece-oj/kece/engine"

// Features are the problem types the SQL executor judges: SQL problems are
// one statement set against one verification, classic batch only.
func Features() []string { return []string{engine.FeatureBatch} }
