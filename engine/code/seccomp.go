package code

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/kece-oj/kece/engine"
)

// builtinSeccomp is the profile used when Config.SeccompProfilePath is empty.
//
// It is a deny-list on top of what the container already lacks (no
// capabilities, no network, no-new-privileges): everything a compiler, JVM,
// CPython or Node needs stays allowed, and these fail with EPERM (ENOSYS for
// clone3, so libc falls back to clone where the namespace flag is checked):
// kernel/module/mount/namespace administration, cross-process memory access
// (process_vm_*), BPF and perf, io_uring, userfaultfd,
// keyrings, clock setting, handle-based opens and user-namespace creation;
// socket() and socketpair() fail for every address family but AF_UNIX
// (EAFNOSUPPORT), and IPC objects that outlive their process cannot be made
// (ENOSYS), both explained below. ptrace stays allowed: the supervisor starts
// every program with PTRACE_TRACEME to apply its limits before the first
// instruction; without capabilities a program can only trace its own
// children (never PID 1, which runs as another uid).
//
// Sockets: one rule refuses socket() and socketpair() whose family argument
// is not exactly AF_UNIX (1), with EAFNOSUPPORT. An allow-list, because a
// deny-list of families misses the ones nobody thought of: the earlier
// profile denied AF_INET, AF_INET6, AF_NETLINK and AF_PACKET and left
// AF_VSOCK open (--network none does not isolate vsock), and because the
// filter compares 64 bits while the kernel reads an int, a family with bit
// 32 set passed every "equals" rule and opened AF_INET after all; "not
// equal to 1" refuses it. AF_UNIX stays: the JVM opens a socketpair when NIO
// starts (javac fails without it), Node's child_process and CPython's
// multiprocessing.Pipe use one, and its reach is the container's own
// network namespace and files. EAFNOSUPPORT is what a kernel built without
// the family answers, so a runtime or library probing for a family (IPv6,
// netlink) takes its "not available" path instead of reporting a permission
// error. The i386 socket() through int 0x80 is filtered by the same rule
// (the profile lists the i386 architecture); libseccomp turns an argument
// rule on socket() into a refusal of socketcall(SYS_SOCKET…) as a whole,
// whose arguments it cannot read. TestSeccompSocketFamilies tries each.
//
// IPC objects that outlive their process: shmget, msgget, semget, the i386
// ipc() multiplexer and mq_open fail with ENOSYS (what a kernel without
// System V IPC or POSIX message queues answers). Their objects stay in the
// container's IPC namespace after the program is killed, with their memory
// charged to the container: one case that filled System V segments left
// every later case of the job at the run ceiling (a 16 MiB case was MLE).
// No runtime uses them (IpcMode none already leaves no /dev/shm for POSIX
// shared memory). TestSeccompIPCObjects tries each.
const builtinSeccomp = `{
  "defaultAction": "SCMP_ACT_ALLOW",
  "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
  "syscalls": [
    {"names": ["acct", "add_key", "bpf", "chroot", "clock_adjtime", "clock_settime", "delete_module",
      "fanotify_init", "finit_module", "init_module", "io_uring_enter", "io_uring_register", "io_uring_setup",
      "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount",
      "name_to_handle_at", "nfsservctl", "open_by_handle_at", "perf_event_open", "pivot_root",
      "process_vm_readv", "process_vm_writev", "quotactl", "reboot", "request_key", "setns",
      "settimeofday", "adjtimex", "swapoff", "swapon", "syslog", "umount2", "unshare", "userfaultfd",
      "uselib", "vhangup"],
     "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    {"names": ["shmget", "msgget", "semget", "ipc", "mq_open"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    {"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
     "args": [{"index": 0, "value": 268435456, "valueTwo": 268435456, "op": "SCMP_CMP_MASKED_EQ"}]},
    {"names": ["socket", "socketpair"], "action": "SCMP_ACT_ERRNO", "errnoRet": 97,
     "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_NE"}]}
  ]
}`

var seccompActions = map[string]bool{
	"SCMP_ACT_KILL": true, "SCMP_ACT_KILL_PROCESS": true, "SCMP_ACT_KILL_THREAD": true, "SCMP_ACT_TRAP": true,
	"SCMP_ACT_ERRNO": true, "SCMP_ACT_TRACE": true, "SCMP_ACT_ALLOW": true, "SCMP_ACT_LOG": true, "SCMP_ACT_NOTIFY": true,
}

// loadSeccomp reads and checks a profile and returns it compacted for the
// daemon. Any failure is a configuration error: never a silent fallback.
func loadSeccomp(path string) (string, error) {
	raw := []byte(builtinSeccomp)
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", engine.Infraf(engine.InfraConfig, "seccomp profile: %w", err)
		}
		raw = b
	}
	var p struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []struct {
			Names  []string `json:"names"`
			Action string   `json:"action"`
		} `json:"syscalls"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&p); err != nil {
		return "", engine.Infraf(engine.InfraConfig, "seccomp profile %q: %w", path, err)
	}
	if !seccompActions[p.DefaultAction] {
		return "", engine.Infraf(engine.InfraConfig, "seccomp profile %q: unknown defaultAction %q", path, p.DefaultAction)
	}
	for i, s := range p.Syscalls {
		if !seccompActions[s.Action] || len(s.Names) == 0 {
			return "", engine.Infraf(engine.InfraConfig, "seccomp profile %q: rule %d has action %q and %d names", path, i, s.Action, len(s.Names))
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", engine.Infraf(engine.InfraConfig, "seccomp profile %q: %w", path, err)
	}
	return buf.String(), nil
}

// describeSeccomp names the profile in logs and errors.
func describeSeccomp(path string) string {
	if path == "" {
		return "built-in"
	}
	return fmt.Sprintf("file %s", path)
}
