package manifest

// Pools are the judge pools; one node process serves exactly one.
var pools = []string{"cpp", "java", "python", "arkts", "mysql"}

// Pools returns the known pools in a stable order.
func Pools() []string { return append([]string(nil), pools...) }

// ValidPool reports whether p is a known pool.
func ValidPool(p string) bool {
	for _, x := range pools {
		if x == p {
			return true
		}
	}
	return false
}

// PoolForLanguage maps a business language to its pool. The business never
// chooses a pool, node or limits: they follow from the language and manifest.
func PoolForLanguage(lang string) (string, error) {
	switch lang {
	case "cpp", "cpp17", "cpp20":
		return "cpp", nil
	case "java", "java17":
		return "java", nil
	case "python", "python3":
		return "python", nil
	case "arkts":
		return "arkts", nil
	case "mysql", "sql":
		return "mysql", nil
	}
	return "", invalid("language", "unknown language %q (known: cpp17, cpp20, java17, python3, arkts, mysql)", lang)
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
