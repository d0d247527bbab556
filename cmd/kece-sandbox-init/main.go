// Command kece-sandbox-init is the supervisor that runs as PID 1 inside every
// code sandbox container; see engine/code/sandboxinit. It must be a static
// binary (no cgo, no net package) because it is bind-mounted into runtime
// images that may not share our libc.
package main

import (
	"fmt"
	"os"

	"github.com/kece-oj/kece/engine/code/sandboxinit"
	"github.com/kece-oj/kece/internal/buildinfo"
)

func main() {
	// Every KECE binary answers --version (as an operator checks what was
	// installed); the supervisor's own arguments never start with it.
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "-version") {
		fmt.Println(buildinfo.String("kece-sandbox-init"))
		return
	}
	os.Exit(sandboxinit.Main(os.Args))
}
