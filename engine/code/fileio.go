package code

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kece-oj/kece/engine"
	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

// File I/O (docs/engine.md, "File input and output"). A file I/O run works
// in /tmp, the sandbox's sticky tmpfs, instead of /box: the supervisor links
// the build's entries there (so "./main", "main.py", "-cp ." still resolve),
// copies the case input to the input file, root-owned and read-only, and
// after the run — every process dead — copies the output file, only if it is
// a regular file, into the root-owned /out, which the host reads as it reads
// stdout. /tmp is enlarged by the largest input and the output limit
// (workBytes), and that is charged to the container's memory as /tmp is.

// ioNameRE is a plain file name for an input or output file.
var ioNameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// workSlackBytes is /tmp room for what else a file I/O program writes next
// to its output (scratch files), on top of the input and the output limit.
const workSlackBytes = 1 << 20

// validateIO refuses unusable file names: not plain, equal, or a name the
// build itself uses (main, main.*, *.class, *.java).
func validateIO(io engine.FileIO) error {
	if !io.Files() {
		if io.Stdio {
			return engine.Infraf(engine.InfraConfig, "file I/O: stdio set but no input or output file named")
		}
		return nil
	}
	if io.InputFile == io.OutputFile {
		return engine.Infraf(engine.InfraConfig, "file I/O: input and output file are both %q", io.InputFile)
	}
	for _, n := range []string{io.InputFile, io.OutputFile} {
		if n == "" {
			continue
		}
		if !ioNameRE.MatchString(n) || reservedIOName(n) {
			return engine.Infraf(engine.InfraConfig, "file I/O: %q is not a plain file name or is one the build uses", n)
		}
	}
	return nil
}

// reservedIOName: names the runtimes' builds use in the working directory.
func reservedIOName(n string) bool {
	return n == "main" || strings.HasPrefix(n, "main.") || strings.HasSuffix(n, ".class") ||
		strings.HasSuffix(n, ".java") || n == "kece-env.d.ts" || n == "__pycache__"
}

// ioWorkBytes is the extra /tmp a file I/O job needs: its largest input (the
// copy in the working directory), the output limit, and some slack.
func ioWorkBytes(t engine.Task) int64 {
	if !t.IO.Files() {
		return 0
	}
	var n int64 = workSlackBytes
	if t.IO.OutputFile != "" {
		n += t.Limits.OutputBytes + 1
	}
	if t.IO.InputFile != "" {
		var largest int64
		for _, c := range t.Cases {
			if st, err := os.Stat(c.InputPath); err == nil {
				largest = max(largest, st.Size())
			}
		}
		n += largest
	}
	return n
}

// ioRequest turns a run of case i into a file I/O run: working directory
// /tmp with the build linked in, the input file placed, the output file
// collected; stdin stays the input only when the problem allows stdio.
func (j *job) ioRequest(req *sandboxinit.Request, i int) {
	io := j.task.IO
	if !io.Files() {
		return
	}
	req.Dir = tmpDir
	f := &sandboxinit.RunFiles{Link: boxDir}
	if io.InputFile != "" {
		f.InputFrom, f.Input = inDir+"/"+caseFile(i), tmpDir+"/"+io.InputFile
		if !io.Stdio {
			req.Stdin = ""
		}
	}
	if io.OutputFile != "" {
		f.Output, f.OutputTo, f.OutputBytes = tmpDir+"/"+io.OutputFile, outDir+"/"+fileOutName(i), j.task.Limits.OutputBytes
	}
	req.Files = f
}

// fileOutName is the name of case i's copied output file in /out (the
// special checker sees it under /user).
func fileOutName(i int) string { return caseFile(i) + ".file" }

// judgedOutput is what the checker judges for case i: stdout, or the copied
// output file. refused is the WA message of a missing or refused output file
// (with stdio allowed, a missing file falls back to stdout). The copy is
// read with readOutput's bounds and refusals.
func (j *job) judgedOutput(i int, res sandboxinit.Result, stdout []byte, stdoutSize int64, stdoutName string) (out []byte, size int64, name, refused string, err error) {
	io := j.task.IO
	if io.OutputFile == "" {
		return stdout, stdoutSize, stdoutName, "", nil
	}
	switch {
	case res.OutputFile == sandboxinit.OutputFileMissing && io.Stdio:
		return stdout, stdoutSize, stdoutName, "", nil
	case res.OutputFile == sandboxinit.OutputFileMissing:
		return nil, 0, "", "output file " + io.OutputFile + " was not created (the answer must be written to it)", nil
	case res.OutputFile != "":
		what := strings.TrimPrefix(res.OutputFile, sandboxinit.OutputFileNotRegular+": ")
		return nil, 0, "", "output file " + io.OutputFile + " is " + what + ", not a regular file: refused", nil
	}
	// The caller removes the copy once the case is checked.
	out, size, err = readOutput(filepath.Join(j.dir, "out", fileOutName(i)), j.task.Limits.OutputBytes)
	return out, size, fileOutName(i), "", err
}
