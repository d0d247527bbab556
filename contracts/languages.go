package contracts

// The language table is part of the contract: the business names a language
// id, and the pool that judges it follows from this table on both sides —
// the control plane when it enqueues (refusing ids not listed here, and
// memory limits below an id's minimum), the node when it runs a special
// checker written in another language than the submission. The node's own
// table (engine/code.Languages, which cannot import this package) holds the
// commands; a test in package worker checks both list the same ids, pools
// and minimum memory.

// pools are the judge pools; one node process serves exactly one.
var pools = []string{"cpp", "java", "python", "arkts", "mysql"}

// Language is one accepted language id.
type Language struct {
	// ID is the key the business sends, e.g. cpp20.
	ID string
	// Pool judges the id.
	Pool string
	// Standard is the standard or version the id means, in a few words.
	Standard string
	// AliasOf names the id this one is a synonym of ("" for a canonical id).
	AliasOf string
	// MinMemoryBytes is the smallest memory limit the id's runtime starts
	// under (0: no minimum, e.g. SQL); lower limits are refused at enqueue.
	MinMemoryBytes int64
}

// languages is every accepted id, canonical ids first within a pool.
var languages = []Language{
	{ID: "cpp11", Pool: "cpp", Standard: "C++11 (GNU dialect: g++ -std=gnu++11)", MinMemoryBytes: 16 << 20},
	{ID: "cpp14", Pool: "cpp", Standard: "C++14 (GNU dialect: g++ -std=gnu++14)", MinMemoryBytes: 16 << 20},
	{ID: "cpp17", Pool: "cpp", Standard: "C++17 (GNU dialect: g++ -std=gnu++17)", MinMemoryBytes: 16 << 20},
	{ID: "cpp20", Pool: "cpp", Standard: "C++20 (GNU dialect: g++ -std=gnu++20)", MinMemoryBytes: 16 << 20},
	{ID: "cpp", Pool: "cpp", Standard: "C++17 (GNU dialect: g++ -std=gnu++17); alias of cpp17", AliasOf: "cpp17", MinMemoryBytes: 16 << 20},
	{ID: "java17", Pool: "java", Standard: "Java 17 (javac --release 17, OpenJDK 17 runtime)", MinMemoryBytes: 4 << 20},
	{ID: "java", Pool: "java", Standard: "Java 17 (javac --release 17, OpenJDK 17 runtime); alias of java17", AliasOf: "java17", MinMemoryBytes: 4 << 20},
	{ID: "python3", Pool: "python", Standard: "Python 3 (CPython 3 as installed in the image)", MinMemoryBytes: 16 << 20},
	{ID: "python", Pool: "python", Standard: "Python 3 (CPython 3 as installed in the image); alias of python3", AliasOf: "python3", MinMemoryBytes: 16 << 20},
	{ID: "arkts", Pool: "arkts", Standard: "ArkTS stand-in: TypeScript (tsc --strict, target ES2020) run on Node.js", MinMemoryBytes: 8 << 20},
	{ID: "mysql", Pool: "mysql", Standard: "MySQL-compatible SQL on the judge database"},
	{ID: "sql", Pool: "mysql", Standard: "MySQL-compatible SQL on the judge database; alias of mysql", AliasOf: "mysql"},
}

// CanonicalLanguages are the keys to name in messages about languages.
const CanonicalLanguages = "cpp11, cpp14, cpp17, cpp20, java17, python3, arkts, mysql"

// Pools returns the judge pools in a stable order.
func Pools() []string { return append([]string(nil), pools...) }

// Languages returns every accepted language id in a stable order.
func Languages() []Language { return append([]Language(nil), languages...) }

// LanguageByID returns the accepted language with that id.
func LanguageByID(id string) (Language, bool) {
	for _, l := range languages {
		if l.ID == id {
			return l, true
		}
	}
	return Language{}, false
}

// PoolOfLanguage returns the pool that judges a language key.
func PoolOfLanguage(lang string) (pool string, ok bool) {
	l, ok := LanguageByID(lang)
	return l.Pool, ok
}
