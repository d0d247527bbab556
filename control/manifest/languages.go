package manifest

import (
	"fmt"

	"github.com/kece-oj/kece/contracts"
	"github.com/kece-oj/kece/contracts/machineapi"
)

// PoolForLanguage maps a business language to its pool. The business never
// chooses a pool, node or limits: they follow from the language and manifest.
func PoolForLanguage(lang string) (string, error) {
	if pool, ok := contracts.PoolOfLanguage(lang); ok {
		return pool, nil
	}
	return "", invalid("language", "unknown language %q (known: %s)", lang, contracts.CanonicalLanguages)
}

// KindForPool is the manifest kind a pool judges.
func KindForPool(pool string) Kind {
	if pool == string(machineapi.PoolMysql) {
		return KindSQL
	}
	return KindCode
}

// CheckPoolKind refuses a submission whose language does not fit the manifest.
func CheckPoolKind(pool string, k Kind) error {
	if KindForPool(pool) != k {
		return invalid("language", "a %s submission cannot be judged against a %s manifest", pool, k)
	}
	return nil
}

// String form used in errors.
func (k Kind) String() string { return string(k) }

// CheckLanguageMemory refuses a code manifest whose memory limit is below
// what the language's runtime needs to start (a JVM under its minimum heap
// cannot run any program, so every case would be a misleading MLE). Manifests
// carry no language, so this is decided per submission at enqueue.
func CheckLanguageMemory(lang string, m Manifest) error {
	l, ok := contracts.LookupLanguage(lang)
	if !ok || m.Kind != KindCode || l.MinMemoryBytes == 0 {
		return nil
	}
	if m.Limits.MemoryMb<<20 < l.MinMemoryBytes {
		return invalid("limits.memoryMb", "%s needs a memory limit of at least %s; the manifest allows %d MiB",
			lang, mib(l.MinMemoryBytes), m.Limits.MemoryMb)
	}
	return nil
}

// mib formats a byte count in MiB, exactly when it is whole.
func mib(b int64) string {
	if b%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", b>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
