package contracts

// The language table is part of the contract: the business names a language
// key, and the pool that judges it follows from this table on both sides —
// the control plane when it enqueues, the node when it runs a special
// checker written in another language than the submission.

// pools are the judge pools; one node process serves exactly one.
var pools = []string{"cpp", "java", "python", "arkts", "mysql"}

// languagePools maps every accepted language key to its pool.
var languagePools = map[string]string{
	"cpp": "cpp", "cpp17": "cpp", "cpp20": "cpp",
	"java": "java", "java17": "java",
	"python": "python", "python3": "python",
	"arkts": "arkts",
	"mysql": "mysql", "sql": "mysql",
}

// CanonicalLanguages are the keys to name in messages about languages.
const CanonicalLanguages = "cpp17, cpp20, java17, python3, arkts, mysql"

// Pools returns the judge pools in a stable order.
func Pools() []string { return append([]string(nil), pools...) }

// PoolOfLanguage returns the pool that judges a language key.
func PoolOfLanguage(lang string) (pool string, ok bool) {
	pool, ok = languagePools[lang]
	return pool, ok
}
