package code

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kece-oj/kece/engine"
)

// socketWays are the ways testdata/sockets.c asks for a socket; the i386
// ones need a kernel that serves 32-bit syscalls.
var socketWays = []struct {
	name       string
	i386, unix bool // the way can reach AF_UNIX at all
}{
	{"socket", false, true},
	{"socketpair", false, true},
	{"socket64", false, false}, // AF_UNIX with bit 32 set is not 1
	{"socket32", true, true},
	{"socketcall", true, false}, // its arguments are out of the filter's reach
}

// sandboxAFMax is AF_MAX of the cpp image's C library (Linux 6.x: AF_MCTP is
// 45): the probe tries families 0..AF_MAX.
const sandboxAFMax = 46

// TestSeccompSocketFamilies tries every address family from 0 to AF_MAX,
// with every socket type, through socket(), socketpair(), socket() with the
// family's bit 32 set, and the i386 socket() and socketcall() (int 0x80), in
// the real sandbox. Under the built-in profile exactly AF_UNIX opens, and
// every other family is refused with the profile's EAFNOSUPPORT. The same
// program under a profile without rules shows what the kernel alone allows
// (AF_INET, AF_INET6, AF_NETLINK, AF_VSOCK here): each line then differs,
// so the expectation is the filter's doing and not the kernel's.
func TestSeccompSocketFamilies(t *testing.T) {
	t.Parallel()
	b := setup(t, "cpp")
	rt, err := RuntimeForLanguage("c17")
	require.NoError(t, err)
	var cases []tcase
	for _, w := range socketWays {
		open := "none"
		if w.unix {
			open = fmt.Sprint(syscall.AF_UNIX)
		}
		cases = append(cases, tcase{in: w.name + "\n",
			exp: fmt.Sprintf("%s 0..%d open %s refused %d\n", w.name, sandboxAFMax, open, int(syscall.EAFNOSUPPORT))})
	}
	judge := func(x *Executor) engine.Verdict {
		task := b.task(t, "cpp", readTestdata(t, "sockets.c"), cases...)
		task.Runtime = rt
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		v, err := x.Execute(ctx, task, nil)
		require.NoError(t, err)
		require.Len(t, v.Cases, len(socketWays), "%+v %s", v, v.CompileLog)
		return v
	}
	// noI386 is the line of a kernel that does not serve int 0x80: the path
	// is closed before any filter, so the case says so and proves nothing.
	noI386 := func(w int, cr engine.CaseResult) bool {
		if !socketWays[w].i386 || !strings.Contains(cr.Message, "no i386 syscalls") {
			return false
		}
		t.Logf("way=%s: this kernel serves no i386 syscalls", socketWays[w].name)
		return true
	}

	v := judge(b.x)
	for i, cr := range v.Cases {
		if noI386(i, cr) {
			continue
		}
		require.Equal(t, engine.StatusAccepted, cr.Status, "built-in profile, way %s: %s", socketWays[i].name, cr.Message)
	}

	permissive := filepath.Join(b.dir, "permissive.json")
	// The same architectures as the built-in profile: without i386 in the
	// list, the daemon's filter kills every int 0x80 call (SIGSYS) instead
	// of passing it to the kernel.
	require.NoError(t, os.WriteFile(permissive, []byte(`{"defaultAction": "SCMP_ACT_ALLOW", `+
		`"architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"], "syscalls": []}`), 0o644))
	x, err := New(Config{NodeID: b.nodeID, Workspace: filepath.Join(b.dir, "ws-permissive"),
		SupervisorPath: supervisorBinary(t), SeccompProfilePath: permissive})
	require.NoError(t, err)
	defer x.Close()
	v = judge(x)
	for i, cr := range v.Cases {
		if noI386(i, cr) {
			continue
		}
		t.Logf("way=%s kernel_alone: %s", socketWays[i].name, cr.Message)
		require.Equal(t, engine.StatusWrongAnswer, cr.Status, "without the filter, way %s must differ: %+v", socketWays[i].name, cr)
	}
	require.NoError(t, b.leftovers(t))
}
