package contracts

import (
	"slices"
	"strings"

	"github.com/kece-oj/kece/contracts/machineapi"
)

// The language table is part of the contract: the business names a language
// id, and the pool that judges it follows from this table on both sides —
// the control plane when it enqueues (and refuses ids not listed here), the
// node when it picks the runtime spec of a submission or of a special
// checker written in another language than the submission. The engine keeps
// the matching runtime specs (engine/code); a worker test checks that both
// tables name the same ids, pools and minimum memory.

// Language is one accepted language id.
type Language struct {
	// ID is what the business sends as `language`.
	ID string
	// Pool judges it.
	Pool string
	// Standard is the language standard or version the id names, in words.
	Standard string
	// AliasOf names the id this one is an alias of ("" for a canonical id):
	// an alias is judged exactly as its target.
	AliasOf string
	// MinMemoryBytes is the smallest manifest memory limit the runtime can
	// start under; enqueueing with a lower limit is refused (422).
	MinMemoryBytes int64
}

// The pools of the table below, named by the contract's Pool enum.
const (
	poolCpp    = string(machineapi.PoolCpp)
	poolJava   = string(machineapi.PoolJava)
	poolPython = string(machineapi.PoolPython)
	poolArkts  = string(machineapi.PoolArkts)
	poolMysql  = string(machineapi.PoolMysql)
)

// languages lists every accepted id, canonical ids first within a pool.
// Minimum memory figures are measured in the sandbox with the node's runtime
// specs (engine/code/languages.go; docs/engine.md, "Memory").
var languages = []Language{
	{ID: "cpp11", Pool: poolCpp, Standard: "C++11 (GNU dialect: g++ -std=gnu++11)", MinMemoryBytes: 16 << 20},
	{ID: "cpp14", Pool: poolCpp, Standard: "C++14 (GNU dialect: g++ -std=gnu++14)", MinMemoryBytes: 16 << 20},
	{ID: "cpp17", Pool: poolCpp, Standard: "C++17 (GNU dialect: g++ -std=gnu++17)", MinMemoryBytes: 16 << 20},
	{ID: "cpp20", Pool: poolCpp, Standard: "C++20 (GNU dialect: g++ -std=gnu++20)", MinMemoryBytes: 16 << 20},
	{ID: "cpp", Pool: poolCpp, Standard: "C++17 (GNU dialect: g++ -std=gnu++17); alias of cpp17", AliasOf: "cpp17", MinMemoryBytes: 16 << 20},
	{ID: "c11", Pool: poolCpp, Standard: "C11 (GNU dialect: gcc -std=gnu11)", MinMemoryBytes: 16 << 20},
	{ID: "c17", Pool: poolCpp, Standard: "C17 (GNU dialect: gcc -std=gnu17)", MinMemoryBytes: 16 << 20},
	{ID: "java17", Pool: poolJava, Standard: "Java 17 (javac --release 17, OpenJDK 17 runtime)", MinMemoryBytes: 4 << 20},
	{ID: "java", Pool: poolJava, Standard: "Java 17 (javac --release 17, OpenJDK 17 runtime); alias of java17", AliasOf: "java17", MinMemoryBytes: 4 << 20},
	{ID: "python3", Pool: poolPython, Standard: "Python 3.11 (CPython)", MinMemoryBytes: 16 << 20},
	{ID: "python", Pool: poolPython, Standard: "Python 3.11 (CPython); alias of python3", AliasOf: "python3", MinMemoryBytes: 16 << 20},
	{ID: "arkts", Pool: poolArkts, Standard: "ArkTS stand-in: TypeScript (tsc --strict, target ES2020) run on Node.js", MinMemoryBytes: 8 << 20},
	{ID: "javascript", Pool: poolArkts, Standard: "JavaScript (Node.js, CommonJS)", MinMemoryBytes: 8 << 20},
	{ID: "mysql", Pool: poolMysql, Standard: "MySQL-dialect SQL"},
	{ID: "sql", Pool: poolMysql, Standard: "MySQL-dialect SQL; alias of mysql", AliasOf: "mysql"},
}

// CanonicalLanguages are the ids to name in messages about languages.
var CanonicalLanguages = canonicalIDs()

func canonicalIDs() string {
	var ids []string
	for _, l := range languages {
		if l.AliasOf == "" {
			ids = append(ids, l.ID)
		}
	}
	return strings.Join(ids, ", ")
}

// Languages returns every accepted language id in a stable order.
func Languages() []Language { return slices.Clone(languages) }

// LookupLanguage returns the table entry of a language id.
func LookupLanguage(id string) (Language, bool) {
	i := slices.IndexFunc(languages, func(l Language) bool { return l.ID == id })
	if i < 0 {
		return Language{}, false
	}
	return languages[i], true
}

// PoolOfLanguage returns the pool that judges a language id.
func PoolOfLanguage(id string) (pool string, ok bool) {
	l, ok := LookupLanguage(id)
	return l.Pool, ok
}
