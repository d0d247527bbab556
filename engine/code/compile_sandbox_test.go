package code

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/internal/sourcenames"
)

// The compile step runs no contestant code and writes only into the
// bounded compile space (docs/engine.md, "Compile sandbox"). One test per
// runtime tries both: to run code while compiling, and to fill the disk
// while compiling.

// setupSpace is setup with a compile space of the given bounds.
func setupSpace(t *testing.T, bytes, files int64, pools ...string) *testBundle {
	t.Helper()
	b := setup(t, pools...)
	x, err := New(Config{NodeID: b.nodeID, Workspace: filepath.Join(b.dir, "ws"), SupervisorPath: supervisorBinary(t),
		CompileSpaceBytes: bytes, CompileSpaceFiles: files})
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	b.x = x
	return b
}

// takeover is a py_compile.py that replaces the standard module when the
// compile imports from the working directory: it writes 3 × 8 MiB there
// and exits with the given code (what the abuse run found).
func takeover(exit int) string {
	return fmt.Sprintf("import sys\nprint('TAKEOVER')\nfor i in range(3):\n    with open('fill%%d' %% i, 'wb') as f:\n        f.write(b'x' * (8 << 20))\nsys.exit(%d)\n", exit)
}

func TestCompileSandboxPython(t *testing.T) {
	t.Parallel()
	// A submission's py_compile.py is refused before anything starts.
	t.Run("stdlib name refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "python")
		task := b.langTask(t, "python", "python3", "print('ok')\n", tcase{exp: "ok\n"})
		task.Files = files("py_compile.py", takeover(0))
		v := b.run(t, task)
		require.Equal(t, engine.StatusCompileError, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		require.Contains(t, v.Message, "py_compile.py")
		require.Contains(t, v.Message, "standard-library")
		require.NotContains(t, v.CompileLog, "TAKEOVER")
		require.NoError(t, b.leftovers(t))
	})
	// The compile is isolated from its working directory: a special judge's
	// own py_compile.py (no submission name rule applies to the problem's
	// files) is never imported, so the checker compiles and judges.
	t.Run("compile isolated from the working directory", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "python")
		pyRT, err := DefaultRuntime("python")
		require.NoError(t, err)
		task := b.langTask(t, "python", "python3", "print('ok')\n", tcase{exp: "ok\n"})
		task.Checker = engine.Checker{Kind: engine.CheckerSpecial, SpecialRuntime: pyRT,
			SpecialSource: []byte("import sys\nsys.exit(0 if open(sys.argv[3]).read() == 'ok\\n' else 1)\n"),
			SpecialFiles:  []engine.CheckerFile{{Name: "py_compile.py", Data: []byte(takeover(3))}}}
		v := b.run(t, task)
		require.Equal(t, engine.StatusAccepted, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		require.NoError(t, b.leftovers(t))
	})
	// The run step still imports the submission's own modules from /box.
	t.Run("run imports own modules", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "python")
		task := b.langTask(t, "python", "python3", "import helpers\nprint(helpers.answer())\n", tcase{exp: "42\n"})
		task.Files = files("helpers.py", "def answer():\n    return 42\n")
		v := b.run(t, task)
		require.Equal(t, engine.StatusAccepted, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
	})
}

func TestCompileSandboxCpp(t *testing.T) {
	t.Parallel()
	// A specs file and a header named like a system header lie beside the
	// source: gcc reads neither (specs come from its own directories, and
	// <stdio.h> is not looked up in the source's directory).
	t.Run("specs and system header names ignored", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "cpp")
		task := b.langTask(t, "cpp", "cpp17", "#include <stdio.h>\nint main() { puts(\"ok\"); }\n", tcase{exp: "ok\n"})
		task.Files = files("stdio.h", "#error shadowed\n",
			"specs", "*link:\n+ %{!c:%:getenv(KECE_PWNED x)}\n\n*startfile:\n/bin/false\n")
		v := b.run(t, task)
		require.Equal(t, engine.StatusAccepted, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
	})
	// gcc loads a.h.gch in place of a.h: a precompiled header is a memory
	// image the compiler trusts, so the name is refused.
	t.Run("precompiled header refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "cpp")
		task := b.langTask(t, "cpp", "cpp17", "#include \"a.h\"\nint main() { return A; }\n", tcase{})
		task.Files = files("a.h", "#define A 0\n", "a.h.gch", "not a real precompiled header")
		v := b.run(t, task)
		require.Equal(t, engine.StatusCompileError, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		require.Contains(t, v.Message, "a.h.gch")
		require.Contains(t, v.Message, "precompiled header")
	})
	// 24 MiB of initialised data makes a 24 MiB binary: more than a 16 MiB
	// compile space holds. (The object file passes through /tmp, 64 MiB,
	// which bounded a binary before the compile space did.)
	t.Run("fill", func(t *testing.T) {
		t.Parallel()
		b := setupSpace(t, 16<<20, 0, "cpp")
		task := b.langTask(t, "cpp", "cpp17", "char big[24 << 20] = {1};\nint main() { return big[1]; }\n", tcase{})
		v := b.run(t, task)
		require.Equal(t, engine.StatusCompileError, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		t.Logf("%s: CE %q", t.Name(), v.Message)
		require.Contains(t, v.Message, "compile space", v.CompileLog)
		require.NoError(t, b.leftovers(t))
	})
}

// evilProcessor is an annotation processor that says so and writes 8 MiB
// into the working directory when javac starts it.
const evilProcessor = `import javax.annotation.processing.*;
import javax.lang.model.SourceVersion;
import javax.lang.model.element.TypeElement;
import java.util.Set;
@SupportedAnnotationTypes("*")
public class Evil extends AbstractProcessor {
  @Override public synchronized void init(ProcessingEnvironment env) {
    super.init(env);
    System.err.println("PROCESSOR RAN");
    try { java.nio.file.Files.write(java.nio.file.Path.of("fill"), new byte[8 << 20]); } catch (Exception e) {}
  }
  @Override public boolean process(Set<? extends TypeElement> a, RoundEnvironment r) { return false; }
  @Override public SourceVersion getSupportedSourceVersion() { return SourceVersion.latestSupported(); }
}
`

func TestCompileSandboxJava(t *testing.T) {
	t.Parallel()
	const main = "public class Main { public static void main(String[] a) { System.out.println(\"ok\"); } }\n"
	// No submission can lay out META-INF/services (names are plain), so
	// the compile command is wrapped here to do it: a compiled processor
	// registered on the class path, then the spec's own javac. It must not
	// start the processor.
	t.Run("annotation processor not run", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "java")
		task := b.langTask(t, "java", "java17", main, tcase{exp: "ok\n"})
		task.Files = files("Evil.java", evilProcessor)
		task.Runtime.CompileCmd = append([]string{"/bin/sh", "-c",
			"javac -d . Evil.java && mkdir -p META-INF/services && echo Evil > META-INF/services/javax.annotation.processing.Processor && exec \"$@\"", "sh"},
			task.Runtime.CompileCmd...)
		v := b.run(t, task)
		require.Equal(t, engine.StatusAccepted, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		require.NotContains(t, v.CompileLog, "PROCESSOR RAN")
	})
	// 1100 classes are 1100 class files: more than the compile space's
	// files (CompileSpaceFilesDefault).
	t.Run("fill", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "java")
		var src strings.Builder
		src.WriteString(main)
		for i := range 1100 {
			fmt.Fprintf(&src, "class K%d {}\n", i)
		}
		task := b.langTask(t, "java", "java17", src.String(), tcase{exp: "ok\n"})
		v := b.run(t, task)
		require.Equal(t, engine.StatusCompileError, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		t.Logf("%s: CE %q", t.Name(), v.Message)
		require.Contains(t, v.Message, "compile space", v.CompileLog)
		require.NoError(t, b.leftovers(t))
	})
}

// scriptProbe is a JavaScript (and TypeScript) program that, if it ran while
// compiling, would print RAN into the compile log and write 8 MiB into the
// working directory. When it runs as the program it reports the outcome of
// writing its directory and the compile space, whether its build is root's
// (so no program of the job, not even one running as the compile uid like
// an interactor, can change it), whether the compile space is a bounded
// tmpfs and whether it is empty (its pages no longer charged to the run).
const scriptProbe = `const fs = require('fs');
console.log('RAN');
let write = 'written';
try { fs.writeFileSync('fill', new Uint8Array(8 << 20)); } catch (e) { write = (e as any).code; }
console.log(write);
write = 'written';
try { fs.writeFileSync('/build/fill', new Uint8Array(8 << 20)); } catch (e) { write = (e as any).code; }
console.log(write);
console.log(fs.statSync('main.js').uid === 0 ? 'root' : 'owned by ' + fs.statSync('main.js').uid);
const m = fs.readFileSync('/proc/self/mounts', 'utf8').split('\n').find((l: string) => l.split(' ')[1] === '/build');
console.log(m && /size=/.test(m) && /nr_inodes=/.test(m) ? 'bounded' : 'unbounded: ' + m);
const st = fs.statfsSync('/build');
console.log(st.bfree === st.blocks ? 'empty' : 'holds ' + (st.blocks - st.bfree) + ' blocks');
`

// jsProbe is scriptProbe without its TypeScript casts.
var jsProbe = strings.NewReplacer(" as any", "", ": string", "").Replace(scriptProbe)

func TestCompileSandboxJavaScript(t *testing.T) {
	t.Parallel()
	b := setup(t, "arkts")
	task := b.langTask(t, "arkts", "javascript", jsProbe, tcase{exp: "RAN\nEACCES\nEACCES\nroot\nbounded\nempty\n"})
	v := b.run(t, task)
	require.Equal(t, engine.StatusAccepted, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
	require.NotContains(t, v.CompileLog, "RAN")
	require.NoError(t, b.leftovers(t))
}

func TestCompileSandboxArkTS(t *testing.T) {
	t.Parallel()
	t.Run("code", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "arkts")
		task := b.langTask(t, "arkts", "arkts", scriptProbe, tcase{exp: "RAN\nEACCES\nEACCES\nroot\nbounded\nempty\n"})
		v := b.run(t, task)
		require.Equal(t, engine.StatusAccepted, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		require.NotContains(t, v.CompileLog, "RAN")
		require.NoError(t, b.leftovers(t))
	})
	// The stand-in's compile copies main.ets to main.ts: a 700 KiB source
	// fits a 1 MiB compile space once, not twice.
	t.Run("fill", func(t *testing.T) {
		t.Parallel()
		b := setupSpace(t, 1<<20, 0, "arkts")
		src := "const s: string = '" + strings.Repeat("x", 700<<10) + "';\nconsole.log(s.length);\n"
		task := b.langTask(t, "arkts", "arkts", src, tcase{exp: fmt.Sprintf("%d\n", 700<<10)})
		v := b.run(t, task)
		require.Equal(t, engine.StatusCompileError, v.Status, "%s %s %+v", v.Message, v.CompileLog, v.Cases)
		t.Logf("%s: CE %q", t.Name(), v.Message)
		require.Contains(t, v.Message, "compile space", v.CompileLog)
		require.NoError(t, b.leftovers(t))
	})
}

// Sources that do not fit the compile space are the node's configuration
// fault, never the contestant's CE.
func TestCompileSpaceTooSmallForSources(t *testing.T) {
	t.Parallel()
	b := setupSpace(t, 1<<20, 0, "python")
	task := b.langTask(t, "python", "python3", "print('ok')\n", tcase{exp: "ok\n"})
	task.Files = files("data.py", "x = '"+strings.Repeat("x", 2<<20)+"'\n")
	_, err := b.x.Execute(t.Context(), task, nil)
	requireClass(t, err, engine.InfraConfig)
	require.ErrorContains(t, err, "CompileSpaceBytes")
	require.NoError(t, b.leftovers(t))
}

// The compile space's bounds are validated with every other setting.
func TestCompileSpaceConfig(t *testing.T) {
	t.Parallel()
	c := Config{NodeID: "n", Workspace: "/ws", SupervisorPath: "/no/such/supervisor", CompileSpaceBytes: 4096, CompileSpaceFiles: -1}
	err := c.Validate()
	require.ErrorContains(t, err, "compile space 4096 bytes is below the minimum")
	require.ErrorContains(t, err, "compile space of -1 files is below the minimum")
	var d Config
	d.setDefaults()
	require.Equal(t, int64(CompileSpaceBytesDefault), d.CompileSpaceBytes)
	require.Equal(t, int64(CompileSpaceFilesDefault), d.CompileSpaceFiles)
}

// The refused Python names are the standard library of the runtime image's
// own CPython (sys.stdlib_module_names), plus sitecustomize and
// usercustomize: the program prints the image's list, the expected output
// is ours.
func TestPythonStdlibNamesMatchImage(t *testing.T) {
	t.Parallel()
	b := setup(t, "python")
	want := strings.Join(sourcenames.PythonStdlib(), " ") + "\n"
	task := b.langTask(t, "python", "python3",
		"import sys\nprint(' '.join(sorted(set(sys.stdlib_module_names) | {'sitecustomize', 'usercustomize'})))\n", tcase{exp: want})
	v := b.run(t, task)
	require.Equal(t, engine.StatusAccepted, v.Status, "%s %+v", v.Message, v.Cases)
}
