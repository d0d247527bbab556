// Package sandboxinit is the small static supervisor that runs as PID 1 inside
// every code sandbox container (binary: cmd/kece-sandbox-init).
//
// One container serves one job: the host attaches to the container's stdin and
// stdout and sends one JSON Request per line; the supervisor runs it and answers
// with one JSON Result per line. User code never sees that channel: its stdin,
// stdout and stderr are files and pipes the supervisor opened, it runs under a
// different uid (so /proc/1/fd is closed to it and it cannot signal PID 1), and
// the statistics are taken by the supervisor (the container's CPU counter less
// its own CPU, wait4), not from anything the program prints.
//
// Each program is forked as the run uid/gid (which clears every capability)
// with PTRACE_TRACEME, so it stops right after exec; the supervisor applies the
// per-run rlimits with prlimit and lets it run, so no user instruction runs
// without them and no intermediate process costs time. The supervisor enforces the
// CPU and wall limits, bounds the captured log while it is produced, and after
// every run kills every leftover process of the sandbox (kill(-1)) and empties
// /tmp, so cases cannot leak state into each other.
//
// This package must stay free of cgo and of the net package: the binary has to
// be static so it runs in any runtime image.
package sandboxinit

// Version is reported in the hello line; the host refuses a mismatch.
//
// 2: Request.Pipes and Result.PeerClosed (interactive problems); an older
// supervisor would ignore Pipes and give the program /dev/null instead.
const Version = "kece-sandbox-init/2"

// Hello is the first line the supervisor writes once it is ready.
type Hello struct {
	Version string `json:"version"`
	PID     int    `json:"pid"`
}

// Request is one program run inside the sandbox.
type Request struct {
	ID   int64    `json:"id"`
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
	Env  []string `json:"env"`
	UID  int      `json:"uid"`
	GID  int      `json:"gid"`

	// Stdin is a path opened read-only by the supervisor ("" = /dev/null).
	Stdin string `json:"stdin,omitempty"`
	// Stdout is a path created by the supervisor (O_EXCL, no symlinks); the
	// program only gets the open descriptor. "" = merge stdout into the log.
	Stdout string `json:"stdout,omitempty"`
	// LogBytes bounds how much of stderr (and merged stdout) is kept; the rest
	// is read and discarded so the writer never blocks.
	LogBytes int `json:"log_bytes"`

	CPUMillis    int64 `json:"cpu_ms"`
	WallMillis   int64 `json:"wall_ms"`
	AddressSpace int64 `json:"as_bytes,omitempty"` // 0: no RLIMIT_AS
	FileSize     int64 `json:"fsize_bytes"`
	Processes    int64 `json:"nproc"`
	Stack        int64 `json:"stack_bytes"`
	OpenFiles    int64 `json:"nofile"`

	// CleanDir is emptied (as the run uid) after the run, e.g. /tmp.
	CleanDir string `json:"clean_dir,omitempty"`

	// Files is the file input and output of a run (file I/O problems);
	// nil for a program on stdin and stdout.
	Files *RunFiles `json:"files,omitempty"`

	// Pipes connects the run to a program in another sandbox (interactive
	// problems, see pipes.go); nil for every other run.
	Pipes *RunPipes `json:"pipes,omitempty"`
}

// RunPipes names two FIFOs the engine created in a root-only directory
// mounted into both sandboxes. The supervisor opens them itself (the program
// only gets the descriptors) in path order, so the two supervisors of one
// interaction meet without deadlock; it refuses anything that is not a FIFO.
type RunPipes struct {
	// Stdin and Stdout: "" means /dev/null and the log, allowed only
	// with Fds (a communication task's manager talks over Fds alone).
	Stdin  string `json:"stdin,omitempty"`
	Stdout string `json:"stdout,omitempty"`
	// Fds are more FIFO ends the program gets as descriptors 3, 4, … in
	// this order (a communication task's manager: one pair per process).
	Fds []PipeFD `json:"fds,omitempty"`
	// OpenMillis bounds the wait for the other side to open its ends.
	OpenMillis int64 `json:"open_ms"`
}

// RunFiles places a run's input file and collects its output file. Dir must
// be a sticky directory owned by root (the /tmp tmpfs): what the supervisor
// puts there stays root's, and the program can neither remove nor replace it.
type RunFiles struct {
	// Link: every entry of this directory (the build) is symlinked into Dir
	// before the run, so the run command's relative paths still resolve.
	Link string `json:"link,omitempty"`
	// InputFrom (a trusted input) is copied to Input, a path in Dir, before
	// the run: root-owned and read-only.
	InputFrom string `json:"input_from,omitempty"`
	Input     string `json:"input,omitempty"`
	// Output, a path in Dir the program writes, is copied after the run —
	// every process of the run is dead by then — to OutputTo, at most
	// OutputBytes+1 bytes, and only when it is a regular file.
	Output      string `json:"output,omitempty"`
	OutputTo    string `json:"output_to,omitempty"`
	OutputBytes int64  `json:"output_bytes,omitempty"`
}

// PipeFD is one more FIFO end of a run: opened for writing when Write.
type PipeFD struct {
	Path  string `json:"path"`
	Write bool   `json:"write,omitempty"`
}

// Output file outcomes (Result.OutputFile); "" means copied, or none asked.
const (
	OutputFileMissing    = "missing"
	OutputFileNotRegular = "not a regular file"
)

// Result is the outcome of one Request, measured by the supervisor.
type Result struct {
	ID int64 `json:"id"`
	// CPUMicros is the CPU time of the program and every process it started,
	// never the supervisor's (see cputime.go); CPUExceeded is exactly
	// CPUMicros > CPUMillis*1000, so the verdict and the figure agree.
	CPUMicros    int64  `json:"cpu_us"`
	WallMicros   int64  `json:"wall_us"`
	MaxRSSKB     int64  `json:"maxrss_kb"`
	ExitCode     int    `json:"exit_code"`
	Signal       int    `json:"signal"`
	CPUExceeded  bool   `json:"cpu_exceeded,omitempty"`
	WallExceeded bool   `json:"wall_exceeded,omitempty"`
	OOMKilled    bool   `json:"oom_killed,omitempty"`
	Log          string `json:"log,omitempty"`
	LogTruncated bool   `json:"log_truncated,omitempty"`
	// OutputFile says why Files.Output was not copied: OutputFileMissing,
	// or OutputFileNotRegular, ": " and what it was (a symbolic link…).
	OutputFile string `json:"output_file,omitempty"`
	// PeerClosed (runs with Pipes): when the program ended, the other side
	// had already closed the program's stdin, so it ended first. The
	// supervisor holds its own copies of the program's two pipe ends until it
	// has reaped the program and looked, so the other side cannot see the
	// program's end before that look (see pipes.go).
	PeerClosed bool `json:"peer_closed,omitempty"`
	// SetupError is set when the program never started (bad request, exec
	// failure of the launcher or of the program): an infrastructure fault.
	SetupError string `json:"setup_error,omitempty"`
}
