package code

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// A source that makes g++ print thousands of errors is a CE within seconds:
// the compiler stops itself after cppMaxErrors errors instead of running on
// with its log already cut.
func TestCompileErrorFloodStopsEarly(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	src := strings.Repeat("int f() { return undefined_name_with_a_long_name; }\n", 5000) + "int main() {}\n"
	task := b.task(t, "cpp", src)
	start := time.Now()
	v := b.run(t, task)
	took := time.Since(start)
	t.Logf("error flood: CE after %s (job incl. container start)", took)
	require.Equal(t, engine.StatusCompileError, v.Status)
	require.Equal(t, "compilation failed", v.Message)
	require.Contains(t, v.CompileLog, "compilation terminated due to -fmax-errors=20")
	require.LessOrEqual(t, strings.Count(v.CompileLog, "error:"), 21)
	// The bound that holds on any machine: the compile step never outlives
	// its own wall limit (the flood itself takes about a second of CPU).
	require.Less(t, took, task.Runtime.CompileWall()+b.x.cfg.DaemonTimeout)
}

// A compiler stopped by a limit is a CE whose message names the limit.
func TestCompileLimitsNamedInMessage(t *testing.T) {
	t.Parallel()
	// Constant evaluation that needs far more than two seconds of CPU and
	// little memory.
	const slow = "constexpr long spin() { long s = 0; for (long i = 0; i < 200000; i++) for (long j = 0; j < 200000; j++) s += i ^ j; return s; }\n" +
		"static_assert(spin() != 1);\nint main() {}\n"
	// Ten million initializers: g++ needs far more than 64 MiB for them.
	const big = "#define A1 1,1,1,1,1,1,1,1,1,1\n#define A2 A1,A1,A1,A1,A1,A1,A1,A1,A1,A1\n#define A3 A2,A2,A2,A2,A2,A2,A2,A2,A2,A2\n" +
		"#define A4 A3,A3,A3,A3,A3,A3,A3,A3,A3,A3\n#define A5 A4,A4,A4,A4,A4,A4,A4,A4,A4,A4\n#define A6 A5,A5,A5,A5,A5,A5,A5,A5,A5,A5\n" +
		"#define A7 A6,A6,A6,A6,A6,A6,A6,A6,A6,A6\nint a[] = {A7};\nint main() { return a[5]; }\n"
	// Each level doubles the type: an explosion no error cap stops.
	const explosion = "#include <utility>\ntemplate <class T> struct P { using type = typename P<std::pair<T, T>>::type; };\n" +
		"int main() { P<int>::type x; (void)x; }\n"
	for _, tc := range []struct {
		name string
		src  string
		tune func(*engine.RuntimeSpec, *engine.Limits)
		want string // regexp on the job message
	}{
		{"cpu", slow, func(rt *engine.RuntimeSpec, _ *engine.Limits) {
			rt.CompileTime, rt.CompileWallTime = 2*time.Second, 2*time.Minute
		}, `^compilation exceeded 2 s CPU$`},
		{"memory", big, func(rt *engine.RuntimeSpec, l *engine.Limits) {
			rt.CompileMemoryBytes, l.MemoryBytes = 64<<20, 16<<20
		}, `^compiler exceeded 64 MiB$`},
		{"template explosion", explosion, func(*engine.RuntimeSpec, *engine.Limits) {}, `^compil(ation|er) exceeded \d+ (s CPU|s wall time|MiB)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "cpp")
			task := b.task(t, "cpp", tc.src)
			tc.tune(&task.Runtime, &task.Limits)
			v := b.run(t, task)
			require.Equal(t, engine.StatusCompileError, v.Status, "%s\n%s", v.Message, v.CompileLog)
			t.Logf("%s: CE %q", tc.name, v.Message)
			require.Regexp(t, tc.want, v.Message, v.CompileLog)
			require.Contains(t, v.CompileLog, "["+v.Message+"]", "the compile log says it too")
			require.NoError(t, b.leftovers(t))
		})
	}
}
