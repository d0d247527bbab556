package code

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kece-oj/kece/engine"
)

// recipes are the package lists deploy/images/build-local.sh installs; the
// image tag is a hash of base||<pool>, computed here and in the script alike.
//
//go:embed recipes
var recipes embed.FS

// MemoryPlaceholder in a compile or run command is replaced by the task's
// memory limit in MiB (e.g. java -Xmx{memory_mb}m).
const MemoryPlaceholder = "{memory_mb}"

// ImageTag returns the local image reference kece/runtime-<pool>:<recipe-hash>
// that deploy/images/build-local.sh builds for pool.
func ImageTag(pool string) (string, error) {
	base, err := recipes.ReadFile("recipes/base")
	if err != nil {
		return "", fmt.Errorf("recipe base: %w", err)
	}
	p, err := recipes.ReadFile("recipes/" + pool)
	if err != nil || pool == "base" {
		return "", fmt.Errorf("no image recipe for pool %q", pool)
	}
	sum := sha256.Sum256(append(append([]byte{}, base...), p...))
	return "kece/runtime-" + pool + ":" + hex.EncodeToString(sum[:])[:12], nil
}

// DefaultRuntime returns the spec of pool for the locally built images. The
// arkts spec is a STAND-IN: TypeScript type-checked by tsc and run on Node.js;
// a production arkts node uses an operator-provided Ark toolchain image with a
// spec that compiles to bytecode (es2abc) and runs it on the Ark VM (ark).
func DefaultRuntime(pool string) (engine.RuntimeSpec, error) {
	image, err := ImageTag(pool)
	if err != nil {
		return engine.RuntimeSpec{}, err
	}
	var s engine.RuntimeSpec
	switch pool {
	case "cpp":
		s = engine.RuntimeSpec{
			SourceFile:             "main.cpp",
			CompileCmd:             []string{"g++", "-O2", "-std=gnu++17", "-pipe", "-o", "main", "main.cpp"},
			RunCmd:                 []string{"./main"},
			CompileTime:            30 * time.Second,
			CompileMemoryBytes:     768 << 20,
			AddressSpaceExtraBytes: 64 << 20,
			MemoryErrorMarkers:     []string{"std::bad_alloc"},
			VersionProbe:           []string{"g++", "--version"},
		}
	case "java":
		jvm := []string{"-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xshare:auto"}
		s = engine.RuntimeSpec{
			SourceFile: "Main.java",
			// javac is short-lived: the C1-only JIT starts it faster.
			CompileCmd:         append(append([]string{"javac", "-J-Xmx512m", "-J-XX:TieredStopAtLevel=1"}, prefixJ(jvm)...), "-encoding", "UTF-8", "-nowarn", "Main.java"),
			RunCmd:             append(append([]string{"java"}, jvm...), "-Xmx"+MemoryPlaceholder+"m", "-Xss64m", "-cp", ".", "Main"),
			CompileTime:        60 * time.Second,
			CompileMemoryBytes: 1 << 30,
			ExtraMemoryBytes:   256 << 20,
			MemoryErrorMarkers: []string{"java.lang.OutOfMemoryError"},
			VersionProbe:       []string{"java", "-version"},
		}
	case "python":
		s = engine.RuntimeSpec{
			SourceFile:             "main.py",
			CompileCmd:             []string{"python3", "-m", "py_compile", "main.py"},
			RunCmd:                 []string{"python3", "-B", "main.py"},
			CompileTime:            10 * time.Second,
			CompileMemoryBytes:     256 << 20,
			AddressSpaceExtraBytes: 64 << 20,
			MemoryErrorMarkers:     []string{"MemoryError"},
			VersionProbe:           []string{"python3", "--version"},
		}
	case "arkts":
		s = engine.RuntimeSpec{
			SourceFile: "main.ets",
			// tsc only reads .ts; the ambient declarations give ArkTS-style
			// programs console/require/process without @types/node.
			CompileCmd: []string{"/bin/sh", "-c",
				"cp main.ets main.ts && printf 'declare const require: any;\\ndeclare const process: any;\\n' > kece-env.d.ts && " +
					"exec tsc --strict --noEmitOnError --pretty false --target es2020 --module commonjs --lib es2020 main.ts kece-env.d.ts"},
			RunCmd:             []string{"node", "--max-old-space-size=" + MemoryPlaceholder, "--stack-size=65500", "main.js"},
			CompileTime:        60 * time.Second,
			CompileMemoryBytes: 768 << 20,
			ExtraMemoryBytes:   128 << 20,
			MemoryErrorMarkers: []string{"JavaScript heap out of memory", "RangeError: Array buffer allocation failed"},
			VersionProbe:       []string{"node", "--version"},
		}
	default:
		return engine.RuntimeSpec{}, fmt.Errorf("no default runtime for pool %q", pool)
	}
	s.Pool = pool
	s.Image = image
	if err := s.Validate(); err != nil {
		return engine.RuntimeSpec{}, err
	}
	return s, nil
}

// prefixJ turns JVM flags into javac's -J… form.
func prefixJ(flags []string) []string {
	out := make([]string, len(flags))
	for i, f := range flags {
		out[i] = "-J" + f
	}
	return out
}

// expand substitutes MemoryPlaceholder in a command.
func expand(cmd []string, memoryBytes int64) []string {
	out := make([]string, len(cmd))
	mb := strconv.FormatInt(max(memoryBytes>>20, 1), 10)
	for i, a := range cmd {
		out[i] = strings.ReplaceAll(a, MemoryPlaceholder, mb)
	}
	return out
}
