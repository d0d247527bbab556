package code

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// fileProbe is the "neither side can read the other's files" probe from the
// problem's side (testdata/probe.h): the contestant's source is given a
// marker that also lands in its build (a string the compiler keeps: an
// unused C/C++ array marked used, a Java class constant, a Python module
// constant, a JavaScript/ArkTS constant), and the interactor or manager
// searches every mount of its container for it, tries the host path of
// the workspace and looks for a process of the contestant's uid. The case's
// expected output holds a control string the probe must find (the problem's
// side is meant to read /exp), so a probe that reads nothing fails.
type fileProbe struct {
	marker, control, workspace string
}

func newFileProbe(x *Executor) fileProbe {
	n := time.Now().UnixNano()
	return fileProbe{
		marker:    fmt.Sprintf("kece-contestant-marker-%d", n),
		control:   fmt.Sprintf("kece-expected-control-%d", n),
		workspace: x.cfg.Workspace,
	}
}

// input is the tail of the case input that asks for the probe: the marker
// and the control string reversed, so no input file contains either.
func (p fileProbe) input() string {
	return reverseString(p.marker) + " " + reverseString(p.control) + " " + p.workspace
}

// mark appends the marker to a contestant source of the given file name.
func (p fileProbe) mark(t *testing.T, file, src string) string {
	t.Helper()
	switch {
	case strings.HasSuffix(file, ".cpp"), strings.HasSuffix(file, ".c"):
		return src + fmt.Sprintf("\n__attribute__((used)) static const char kece_probe_marker[] = %q;\n", p.marker)
	case strings.HasSuffix(file, ".java"):
		return src + fmt.Sprintf("\nclass KeceProbeMarker { static final String M = %q; }\n", p.marker)
	case strings.HasSuffix(file, ".py"):
		return src + fmt.Sprintf("\nKECE_PROBE_MARKER = %q\n", p.marker)
	case strings.HasSuffix(file, ".js"):
		return src + fmt.Sprintf("\nconst KECE_PROBE_MARKER = %q;\n", p.marker)
	case strings.HasSuffix(file, ".ets"):
		return src + fmt.Sprintf("\nconst KECE_PROBE_MARKER: string = %q;\n", p.marker)
	}
	t.Fatalf("no marker rule for %s", file)
	return ""
}

// expect writes the control string as case i's expected output, and with
// canary the marker too: the probe's own check that it finds the marker
// wherever it can read it.
func (p fileProbe) expect(t *testing.T, task engine.Task, i int, canary bool) {
	t.Helper()
	exp := p.control + "\n"
	if canary {
		exp += p.marker + "\n"
	}
	require.NoError(t, os.WriteFile(task.Cases[i].ExpectedPath, []byte(exp), 0o644))
}

// checker gives the interactor or manager the probe's header.
func (p fileProbe) checker(t *testing.T, ck engine.Checker) engine.Checker {
	t.Helper()
	ck.SpecialFiles = append(ck.SpecialFiles, engine.CheckerFile{Name: "probe.h", Data: []byte(readTestdata(t, "probe.h"))})
	return ck
}

func reverseString(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}
