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

// sandboxAFMax is AF_MAX of the cpp image's C library (Linux 6.x: AF_MCTP is
// 45): testdata/sockets.c tries families 0..AF_MAX.
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
	line := func(way string, unix bool) string {
		open := "none"
		if unix {
			open = fmt.Sprint(syscall.AF_UNIX)
		}
		return fmt.Sprintf("%s 0..%d open %s refused %d", way, sandboxAFMax, open, int(syscall.EAFNOSUPPORT))
	}
	probeSeccomp(t, "sockets.c", []seccompWay{
		{"socket", false, line("socket", true)},
		{"socketpair", false, line("socketpair", true)},
		{"socket64", false, line("socket64", false)}, // AF_UNIX with bit 32 set is not 1
		{"socket32", true, line("socket32", true)},
		{"socketcall", true, line("socketcall", false)}, // its arguments are out of the filter's reach
	})
}

// TestSeccompIPCObjects: System V shared memory, message queues and
// semaphores and POSIX message queues are refused with ENOSYS, through the
// 64-bit calls and the i386 ones (shmget and the ipc() multiplexer). Their
// objects outlive the process that made them, and memory in them stays
// charged to the container: a case that filled System V segments left the
// next cases of the job at the run ceiling (TestRunMemoryHeldToProblemLimit,
// sysvshm then fits, was MLE for the small "fits" case). Under a profile
// without rules each is created.
func TestSeccompIPCObjects(t *testing.T) {
	t.Parallel()
	var ways []seccompWay
	for _, w := range []string{"shmget", "msgget", "semget", "mq_open", "shmget32", "ipc32"} {
		ways = append(ways, seccompWay{w, strings.HasSuffix(w, "32"), fmt.Sprintf("%s refused %d", w, int(syscall.ENOSYS))})
	}
	probeSeccomp(t, "sysvipc.c", ways)
}

// seccompWay is one case of a seccomp probe program: the way it asks the
// kernel (its input), whether that needs i386 syscalls, and the line the
// built-in profile must make it print.
type seccompWay struct {
	name string
	i386 bool
	want string
}

// probeSeccomp judges the C program src with one case per way, under the
// built-in profile (every case AC) and under a profile without rules (every
// case WA: the kernel alone answers otherwise, so each expectation is the
// filter's doing). A way that needs i386 syscalls on a kernel that does not
// serve them prints "no i386 syscalls": the path is closed before any
// filter, so the case proves nothing and is only logged.
func probeSeccomp(t *testing.T, src string, ways []seccompWay) {
	t.Helper()
	b := setup(t, "cpp")
	rt, err := RuntimeForLanguage("c17")
	require.NoError(t, err)
	var cases []tcase
	for _, w := range ways {
		cases = append(cases, tcase{in: w.name + "\n", exp: w.want + "\n"})
	}
	judge := func(x *Executor) engine.Verdict {
		task := b.task(t, "cpp", readTestdata(t, src), cases...)
		task.Runtime = rt
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		v, err := x.Execute(ctx, task, nil)
		require.NoError(t, err)
		require.Len(t, v.Cases, len(ways), "%+v %s", v, v.CompileLog)
		return v
	}
	noI386 := func(w int, cr engine.CaseResult) bool {
		if !ways[w].i386 || !strings.Contains(cr.Message, "no i386 syscalls") {
			return false
		}
		t.Logf("way=%s: this kernel serves no i386 syscalls", ways[w].name)
		return true
	}

	v := judge(b.x)
	for i, cr := range v.Cases {
		if noI386(i, cr) {
			continue
		}
		require.Equal(t, engine.StatusAccepted, cr.Status, "built-in profile, way %s: %s", ways[i].name, cr.Message)
	}

	// The same architectures as the built-in profile: without i386 in the
	// list, the daemon's filter kills every int 0x80 call (SIGSYS) instead
	// of passing it to the kernel.
	permissive := filepath.Join(b.dir, "permissive.json")
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
		t.Logf("way=%s kernel_alone: %s", ways[i].name, cr.Message)
		require.Equal(t, engine.StatusWrongAnswer, cr.Status, "without the filter, way %s must differ: %+v", ways[i].name, cr)
	}
	require.NoError(t, b.leftovers(t))
}
