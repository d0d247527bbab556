package manifest

import (
	"slices"

	"github.com/kece-oj/kece/contracts"
)

// Pools returns the known pools in a stable order (the contract's table).
func Pools() []string { return contracts.Pools() }

// ValidPool reports whether p is a known pool.
func ValidPool(p string) bool { return slices.Contains(contracts.Pools(), p) }

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
	if pool == "mysql" {
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
