package code

import (
	"fmt"
	"slices"
	"time"

	"github.com/kece-oj/kece/engine"
)

// The language table: every code language id the node accepts, with the
// exact standard or version it names. contracts/languages.go lists the same
// ids for the control plane (which must not import the engine, nor the
// engine the contracts); a test in package worker checks the two agree.
//
// Ids are grouped by pool; one image per pool serves all of its ids, so a
// pool's ids differ only in flags (the C++ standard) or not at all (aliases).

// languageOrder is the listing order of the ids.
var languageOrder = []string{"cpp11", "cpp14", "cpp17", "cpp20", "cpp", "c11", "c17", "java17", "java", "python3", "python", "arkts", "javascript"}

// defaultLanguage is the id each pool's DefaultRuntime judges.
var defaultLanguage = map[string]string{"cpp": "cpp17", "java": "java17", "python": "python3", "arkts": "arkts"}

// aliases maps an alias id to the id whose spec it shares.
var aliases = map[string]string{"cpp": "cpp17", "java": "java17", "python": "python3"}

// Compile limits. The CPU limit is what bounds a runaway compiler (nothing
// in the sandbox can make a compiler block without using CPU), and the
// compilers themselves stop early on error floods (g++ -fmax-errors, javac
// -Xmaxerrs). The wall limit is only a backstop (compileWall): a compile
// starved of CPU by a busy host must not become a false CE.
const (
	cppCompileCPU    = 10 * time.Second
	cppCompileMemory = 768 << 20
	// cppMaxErrors stops g++ after this many errors: a source that makes it
	// print thousands is a CE in a second, not after half a minute.
	cppMaxErrors = 20
	javaMaxErrs  = 50
)

// compileWall is the compile wall limit for a CPU limit: three times it plus
// 10 s. Measured here, javac of a one-class program (about 1 s of CPU) took
// over 20 s of wall time at load average 40 on 2 cores.
func compileWall(cpu time.Duration) time.Duration { return 3*cpu + 10*time.Second }

// Minimum memory limits, measured in the sandbox with these specs by judging
// an a+b program at falling limits (docs/engine.md "Memory"; TestMinimumMemory
// keeps them true). Peak RSS is judged against limit + extra memory, so a
// runtime's own start-up footprint counts: C++ (libstdc++) peaked at 5.6–7.6
// MiB and CPython at 7.9–8.0 MiB, so both get twice that; the JVM starts
// from -Xmx2m on (-Xmx1m: "Too small maximum heap") and Node from
// --max-old-space-size=4, each given one step of headroom.
const (
	cppMinMemory    = 16 << 20
	cMinMemory      = 16 << 20
	javaMinMemory   = 4 << 20
	pythonMinMemory = 16 << 20
	arktsMinMemory  = 8 << 20
)

// nodeMemoryMarkers are Node's own reports of running out of memory: V8's
// heap limit, a failed ArrayBuffer or Buffer allocation, and a worker_thread
// stopped at its heap limit (the main thread then dies of the unhandled
// ERR_WORKER_OUT_OF_MEMORY, exit 1, which was judged RE).
var nodeMemoryMarkers = []string{"JavaScript heap out of memory", "RangeError: Array buffer allocation failed", "ERR_WORKER_OUT_OF_MEMORY"}

// rawLanguage builds the spec of one canonical id (image not set).
func rawLanguage(id string) (engine.RuntimeSpec, bool) {
	switch id {
	case "cpp11", "cpp14", "cpp17", "cpp20":
		n := id[len("cpp"):]
		return engine.RuntimeSpec{
			Pool:     "cpp",
			Standard: "C++" + n + " (GNU dialect: g++ -std=gnu++" + n + ")",
			Entry:    engine.EntryFixedFile, SourceFile: "main.cpp",
			CompileCmd: []string{"g++", "-std=gnu++" + n, "-O2", "-pipe", "-DONLINE_JUDGE",
				fmt.Sprintf("-fmax-errors=%d", cppMaxErrors), "-o", "main", "main.cpp"},
			RunCmd:                 []string{"./main"},
			CompileTime:            cppCompileCPU,
			CompileWallTime:        compileWall(cppCompileCPU),
			CompileMemoryBytes:     cppCompileMemory,
			MinMemoryBytes:         cppMinMemory,
			AddressSpaceExtraBytes: 64 << 20,
			MemoryErrorMarkers:     []string{"std::bad_alloc"},
			VersionProbe:           []string{"g++", "--version"},
		}, true
	case "c11", "c17":
		// C is served by the cpp pool with the gcc its image already has (g++
		// depends on it). -lm comes after the source, as the linker needs.
		n := id[len("c"):]
		return engine.RuntimeSpec{
			Pool:     "cpp",
			Standard: "C" + n + " (GNU dialect: gcc -std=gnu" + n + ")",
			Entry:    engine.EntryFixedFile, SourceFile: "main.c",
			CompileCmd: []string{"gcc", "-std=gnu" + n, "-O2", "-pipe", "-DONLINE_JUDGE",
				fmt.Sprintf("-fmax-errors=%d", cppMaxErrors), "-o", "main", "main.c", "-lm"},
			RunCmd:                 []string{"./main"},
			CompileTime:            cppCompileCPU,
			CompileWallTime:        compileWall(cppCompileCPU),
			CompileMemoryBytes:     cppCompileMemory,
			MinMemoryBytes:         cMinMemory,
			AddressSpaceExtraBytes: 64 << 20,
			VersionProbe:           []string{"gcc", "--version"},
		}, true
	case "java17":
		jvm := []string{"-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xshare:auto"}
		compile := []string{"javac", "-J-Xmx512m", "-J-XX:TieredStopAtLevel=1"} // short-lived: C1 only starts faster
		compile = append(compile, prefixJ(jvm)...)
		// -proc:none: javac starts no annotation processor (found through
		// META-INF/services on the class path, "." by default) and so runs
		// no code of the submission (docs/engine.md, "Compile sandbox").
		compile = append(compile, "-proc:none", "--release", "17", "-encoding", "UTF-8", "-nowarn",
			"-Xmaxerrs", fmt.Sprint(javaMaxErrs), "-Xmaxwarns", "10", "-d", ".", engine.SourcePlaceholder)
		return engine.RuntimeSpec{
			Pool:     "java",
			Standard: "Java 17 (javac --release 17, OpenJDK 17 runtime)",
			Entry:    engine.EntryJavaClass,
			// -d . puts a declared package's classes under ./<package>/, so
			// the qualified name runs from class path ".".
			CompileCmd:         compile,
			RunCmd:             append(append([]string{"java"}, jvm...), "-Xmx"+MemoryPlaceholder+"m", "-Xss64m", "-cp", ".", engine.ClassPlaceholder),
			CompileTime:        10 * time.Second,
			CompileWallTime:    compileWall(10 * time.Second),
			CompileMemoryBytes: 1 << 30,
			ExtraMemoryBytes:   256 << 20,
			MinMemoryBytes:     javaMinMemory,
			MemoryErrorMarkers: []string{
				"java.lang.OutOfMemoryError",
				// The JVM prints these on stdout when it cannot start under
				// its heap setting or the memory it was given.
				"Too small maximum heap", "Too small initial heap",
				"Could not reserve enough space",
				"There is insufficient memory for the Java Runtime Environment",
			},
			MemoryErrorExceptions: []string{"unable to create native thread"},
			VersionProbe:          []string{"java", "-version"},
		}, true
	case "python3":
		return engine.RuntimeSpec{
			Pool:     "python",
			Standard: "Python 3.11 (CPython)",
			Entry:    engine.EntryFixedFile, SourceFile: "main.py",
			// -I: the compile imports nothing from the working directory
			// (no submission module shadows py_compile or what it imports);
			// the run still puts main.py's directory first on the path.
			CompileCmd:             []string{"python3", "-I", "-m", "py_compile", "main.py"},
			RunCmd:                 []string{"python3", "-B", "main.py"},
			CompileTime:            5 * time.Second,
			CompileWallTime:        compileWall(5 * time.Second),
			CompileMemoryBytes:     256 << 20,
			MinMemoryBytes:         pythonMinMemory,
			AddressSpaceExtraBytes: 64 << 20,
			MemoryErrorMarkers:     []string{"MemoryError"},
			VersionProbe:           []string{"python3", "--version"},
		}, true
	case "arkts":
		// STAND-IN: TypeScript type-checked by tsc and run on Node.js; a
		// production arkts node uses an operator-provided Ark toolchain image
		// with a spec that compiles to bytecode (es2abc) and runs it on the
		// Ark VM (ark).
		return engine.RuntimeSpec{
			Pool:     "arkts",
			Standard: "ArkTS stand-in: TypeScript (tsc --strict, target ES2020) run on Node.js",
			Entry:    engine.EntryFixedFile, SourceFile: "main.ets",
			// tsc only reads .ts; the ambient declarations give ArkTS-style
			// programs console/require/process without @types/node. tsc has
			// no error cap: the CPU limit bounds it.
			CompileCmd: []string{"/bin/sh", "-c",
				"cp main.ets main.ts && printf 'declare const require: any;\\ndeclare const process: any;\\ndeclare const console: any;\\n' > kece-env.d.ts && " +
					"exec tsc --strict --noEmitOnError --pretty false --target es2020 --module commonjs --lib es2020 main.ts kece-env.d.ts"},
			RunCmd:             []string{"node", "--max-old-space-size=" + MemoryPlaceholder, "--stack-size=65500", "main.js"},
			CompileTime:        15 * time.Second,
			CompileWallTime:    compileWall(15 * time.Second),
			CompileMemoryBytes: 768 << 20,
			ExtraMemoryBytes:   128 << 20,
			MinMemoryBytes:     arktsMinMemory,
			MemoryErrorMarkers: nodeMemoryMarkers,
			VersionProbe:       []string{"node", "--version"},
		}, true
	case "javascript":
		// Node.js from the arkts pool's image (the stand-in carries it; an
		// operator's Ark image must add it, docs/engine.md). A .js file
		// without a package.json is CommonJS; the "compile" is Node's own
		// syntax check, so a source that cannot parse is a CE.
		return engine.RuntimeSpec{
			Pool:     "arkts",
			Standard: "JavaScript (Node.js, CommonJS)",
			Entry:    engine.EntryFixedFile, SourceFile: "main.js",
			CompileCmd:         []string{"node", "--check", "main.js"},
			RunCmd:             []string{"node", "--max-old-space-size=" + MemoryPlaceholder, "--stack-size=65500", "main.js"},
			CompileTime:        5 * time.Second,
			CompileWallTime:    compileWall(5 * time.Second),
			CompileMemoryBytes: 256 << 20,
			ExtraMemoryBytes:   128 << 20,
			MinMemoryBytes:     arktsMinMemory,
			MemoryErrorMarkers: nodeMemoryMarkers,
			VersionProbe:       []string{"node", "--version"},
		}, true
	}
	return engine.RuntimeSpec{}, false
}

// RuntimeForLanguage returns the validated spec of a code language id for
// the locally built image of its pool. Aliases (cpp, java, python) share the
// spec of the id they stand for, under their own id.
func RuntimeForLanguage(id string) (engine.RuntimeSpec, error) {
	canonical := id
	if a, ok := aliases[id]; ok {
		canonical = a
	}
	s, ok := rawLanguage(canonical)
	if !ok {
		return engine.RuntimeSpec{}, fmt.Errorf("no code runtime for language %q (known: %v)", id, languageOrder)
	}
	if canonical != id {
		s.Standard += "; alias of " + canonical
	}
	s.Language = id
	image, err := ImageTag(s.Pool)
	if err != nil {
		return engine.RuntimeSpec{}, err
	}
	s.Image = image
	if err := s.Validate(); err != nil {
		return engine.RuntimeSpec{}, err
	}
	return s, nil
}

// Languages returns the spec of every code language id, in listing order.
func Languages() ([]engine.RuntimeSpec, error) {
	out := make([]engine.RuntimeSpec, 0, len(languageOrder))
	for _, id := range languageOrder {
		s, err := RuntimeForLanguage(id)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// LanguagesOfPool returns the specs of the ids a pool judges.
func LanguagesOfPool(pool string) ([]engine.RuntimeSpec, error) {
	all, err := Languages()
	if err != nil {
		return nil, err
	}
	all = slices.DeleteFunc(all, func(s engine.RuntimeSpec) bool { return s.Pool != pool })
	if len(all) == 0 {
		return nil, fmt.Errorf("no code languages for pool %q", pool)
	}
	return all, nil
}

// prefixJ turns JVM flags into javac's -J… form.
func prefixJ(flags []string) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "-J" + f
	}
	return out
}
