package code

import (
	"debug/elf"
	"fmt"
)

// checkStatic refuses a supervisor that needs a dynamic loader: it has to run
// in every runtime image whatever libc that image carries.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("supervisor %s: not an ELF binary: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("supervisor %s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	return nil
}
