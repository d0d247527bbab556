package code

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kece-oj/kece/engine"
)

// MemoryPlaceholder in a compile or run command is replaced by the task's
// memory limit in MiB (e.g. java -Xmx{memory_mb}m).
const MemoryPlaceholder = "{memory_mb}"

// resolveEntry applies the spec's entry point rule to one source: the
// returned spec names the concrete source file and has the source and class
// placeholders of its commands filled in. An *entryError is the user's
// compile error (no runnable class); it is decided before any container
// starts.
func resolveEntry(rt engine.RuntimeSpec, src []byte) (engine.RuntimeSpec, error) {
	class := ""
	switch rt.Entry {
	case engine.EntryFixedFile:
	case engine.EntryJavaClass:
		e, err := findJavaEntry(src)
		if err != nil {
			return rt, err
		}
		rt.SourceFile, class = e.File+".java", e.Run()
	default:
		return rt, fmt.Errorf("unknown entry rule %q", rt.Entry)
	}
	sub := strings.NewReplacer(engine.SourcePlaceholder, rt.SourceFile, engine.ClassPlaceholder, class)
	fill := func(cmd []string) []string {
		if cmd == nil {
			return nil
		}
		out := make([]string, len(cmd))
		for i, a := range cmd {
			out[i] = sub.Replace(a)
		}
		return out
	}
	rt.CompileCmd, rt.RunCmd = fill(rt.CompileCmd), fill(rt.RunCmd)
	rt.Entry = engine.EntryFixedFile
	return rt, nil
}

// isEntryError reports whether err is a source without a usable entry point.
func isEntryError(err error) bool {
	var ee *entryError
	return errors.As(err, &ee)
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
