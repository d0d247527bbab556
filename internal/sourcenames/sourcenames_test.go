package sourcenames

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPython(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"py_compile.py", "site.py", "sitecustomize.py", "usercustomize.py", "encodings.py",
		"random.pyc", "math.cpython-311-x86_64-linux-gnu.so", "os.abi3.so", "types.so", "_io.py"} {
		require.Contains(t, Python(name), "standard-library", name)
		require.Contains(t, Python(name), name)
	}
	// Not importable as the module, or not a standard module.
	for _, name := range []string{"helpers.py", "main2.py", "random.txt", "py_compile", "solution.py", "Random.py", "mysite.py"} {
		require.Empty(t, Python(name), name)
	}
	require.Len(t, PythonStdlib(), 307)
	require.Contains(t, PythonStdlib(), "sitecustomize")
}

func TestC(t *testing.T) {
	t.Parallel()
	require.Contains(t, C("a.h.gch"), "precompiled header")
	require.Contains(t, C("bits.gch"), "bits.gch")
	require.Empty(t, C("a.h"))
	require.Empty(t, C("gch.h"))
}
