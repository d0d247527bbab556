// Command kece-sandbox-init is the supervisor that runs as PID 1 inside every
// code sandbox container; see engine/code/sandboxinit. It must be a static
// binary (no cgo, no net package) because it is bind-mounted into runtime
// images that may not share our libc.
package main

import (
	"os"

	"github.com/kece-oj/kece/engine/code/sandboxinit"
)

func main() { os.Exit(sandboxinit.Main(os.Args)) }
