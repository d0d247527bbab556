package manifest

// Checker types whose special program talks to the contestant's while it
// runs: the interactor of an interactive problem, the manager of a
// communication task (docs/engine.md, "Interactive problems" and
// "Communication tasks").
const (
	CheckerInteractive   = "interactive"
	CheckerCommunication = "communication"
	// MaxProcesses bounds a communication task's processes.
	MaxProcesses = 8
)

// validateInteractive checks what differs for an interactor or a manager: testlib's
// convention only (validated as testlib; an explicit "testlib" is stored as
// absent, one canonical form per meaning), its own CPU limit, and no file input or output (the
// interaction is the program's stdin and stdout). A special checker takes
// no timeMs. Manifests published before interactive problems carry no
// timeMs and keep their canonical JSON.
func (m *Manifest) validateInteractive() error {
	s := m.Checker.Special
	if m.Checker.Type == CheckerCommunication && (s.Processes < 1 || s.Processes > MaxProcesses) {
		return invalid("checker.special.processes", "a communication task needs 1..%d processes", MaxProcesses)
	}
	if m.Checker.Type != CheckerCommunication && s.Processes != 0 {
		return invalid("checker.special.processes", "only a communication task's manager takes processes")
	}
	if m.Checker.Type != CheckerInteractive && m.Checker.Type != CheckerCommunication {
		if s.TimeMs != 0 {
			return invalid("checker.special.timeMs", "only an interactor or a manager (checker type interactive or communication) takes a time limit")
		}
		return nil
	}
	switch s.Protocol {
	case "", ProtocolTestlib:
		// Validated as testlib (maxPoints included), stored as absent
		// by the caller.
		s.Protocol = ProtocolTestlib
	default:
		return invalid("checker.special.protocol", "an interactor follows testlib's convention: absent or testlib, got %q", s.Protocol)
	}
	if s.TimeMs < 0 || s.TimeMs > MaxTimeMs {
		return invalid("checker.special.timeMs", "must be 1..%d (absent means the node's checker time)", MaxTimeMs)
	}
	if m.IO != nil && (m.IO.InputFile != "" || m.IO.OutputFile != "" || m.IO.Stdio) {
		return invalid("io", "an %s problem talks over stdin and stdout: no input or output file", m.Checker.Type)
	}
	return nil
}

// SlotWeight is how many slots of its node and host group a job judged
// against this manifest holds while it runs (docs/scheduling.md, "Slot
// weights"). A slot is one sandboxed program running at the run ceiling
// of its problem at the same time as the others: an ordinary problem runs
// one program per case, and its special checker runs after the program,
// not beside it (1); an interactive problem runs the program and the
// interactor at once (2); a communication task runs its processes and the
// manager at once (processes + 1, up to MaxProcesses + 1). Compiling runs
// one program at a time whatever the kind.
func (m *Manifest) SlotWeight() int {
	switch m.Checker.Type {
	case CheckerInteractive:
		return 2
	case CheckerCommunication:
		if m.Checker.Special != nil {
			return m.Checker.Special.Processes + 1
		}
	}
	return 1
}

// MaxSlotWeight is the largest SlotWeight of a valid manifest.
const MaxSlotWeight = MaxProcesses + 1
