package contracts

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem types (features) a judge node may support. A node reports the ones
// its engine judges; a job requires the ones its manifest and submission use,
// and a claim leases a job only to a node that reported every one of them
// (docs/scheduling.md, "Capabilities"). FeatureBatch is classic batch
// judging (stdin/stdout, one source file): every node supports it, a node
// that reports nothing supports only it.
const (
	FeatureBatch         = "batch"
	FeatureFileIO        = "file_io"
	FeatureSubtasks      = "subtasks"
	FeatureMultiFile     = "multi_file"
	FeatureInteractive   = "interactive"
	FeatureCommunication = "communication"
	FeatureGrader        = "grader"
)

// Why queued submissions of a pool wait (the public judgers summary's
// PoolWaitReason).
const (
	// WaitNoReadyNode: the pool has no ready node.
	WaitNoReadyNode = "NO_READY_NODE"
	// WaitNoCapableNode: ready nodes exist, but none reported a language or
	// problem type some queued submissions need.
	WaitNoCapableNode = "NO_CAPABLE_NODE"
)

// features is the list of problem types in capability-bit order: a feature's
// bit is 1 << its index. The bits are stored on queued jobs, so the list is
// append-only.
var features = []string{FeatureBatch, FeatureFileIO, FeatureSubtasks, FeatureMultiFile,
	FeatureInteractive, FeatureCommunication, FeatureGrader}

// Features returns every problem type, in capability-bit order.
func Features() []string { return slices.Clone(features) }

// KnownFeatures is the list of problem types to name in messages.
var KnownFeatures = strings.Join(features, ", ")

// languageBits is the capability-bit order of the canonical language ids:
// a language's bit is 1 << (LanguageBitBase + its index). Append-only, like
// features; an alias has its canonical id's bit.
var languageBits = []string{"cpp11", "cpp14", "cpp17", "cpp20", "c11", "c17", "java17", "python3",
	"arkts", "javascript", "mysql"}

// LanguageBitBase is the first capability bit of a language; the bits below
// it are problem types.
const LanguageBitBase = 16

// AllLanguageCaps has the bit of every language: what a node that never
// reported its languages is taken to run (its pool then decides, as before
// languages were reported).
func AllLanguageCaps() uint64 {
	var m uint64
	for i := range languageBits {
		m |= 1 << (LanguageBitBase + i)
	}
	return m
}

// FeatureCaps returns the capability bits of problem types; an unknown name
// is an error naming the known ones.
func FeatureCaps(names []string) (uint64, error) {
	var m uint64
	for _, n := range names {
		i := slices.Index(features, n)
		if i < 0 {
			return 0, fmt.Errorf("unknown problem type %q (known: %s)", n, KnownFeatures)
		}
		m |= 1 << i
	}
	return m, nil
}

// FeatureNames returns the problem types whose bits are set in caps, in
// capability-bit order (language bits are ignored).
func FeatureNames(caps uint64) []string {
	var out []string
	for i, f := range features {
		if caps&(1<<i) != 0 {
			out = append(out, f)
		}
	}
	return out
}

// LanguageCap returns the capability bit of a language id (an alias has its
// canonical id's bit).
func LanguageCap(id string) (uint64, bool) {
	l, ok := LookupLanguage(id)
	if !ok {
		return 0, false
	}
	id = cmp.Or(l.AliasOf, l.ID)
	i := slices.Index(languageBits, id)
	if i < 0 {
		return 0, false
	}
	return 1 << (LanguageBitBase + i), true
}

// LanguageCaps returns the capability bits of the language ids a node
// reports; ids without a bit are ignored (the heartbeat refuses them).
func LanguageCaps(ids []string) uint64 {
	var m uint64
	for _, id := range ids {
		b, _ := LanguageCap(id)
		m |= b
	}
	return m
}

// CapNames names the capability bits set in caps: problem types, then
// language ids, each in bit order.
func CapNames(caps uint64) []string {
	out := FeatureNames(caps)
	for i, id := range languageBits {
		if caps&(1<<(LanguageBitBase+i)) != 0 {
			out = append(out, id)
		}
	}
	return out
}
