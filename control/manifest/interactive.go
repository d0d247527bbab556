package manifest

// CheckerInteractive is the checker type of an interactive problem: its
// special program is the interactor (docs/engine.md, "Interactive problems").
const CheckerInteractive = "interactive"

// validateInteractive checks what differs for an interactor: testlib's
// convention only (an explicit "testlib" is stored as absent, one canonical
// form per meaning), its own CPU limit, and no file input or output (the
// interaction is the program's stdin and stdout). A special checker takes
// no timeMs. Manifests published before interactive problems carry no
// timeMs and keep their canonical JSON.
func (m *Manifest) validateInteractive() error {
	s := m.Checker.Special
	if m.Checker.Type != CheckerInteractive {
		if s.TimeMs != 0 {
			return invalid("checker.special.timeMs", "only an interactor (checker type interactive) takes a time limit")
		}
		return nil
	}
	switch s.Protocol {
	case "", ProtocolTestlib:
		s.Protocol = ""
	default:
		return invalid("checker.special.protocol", "an interactor follows testlib's convention: absent or testlib, got %q", s.Protocol)
	}
	if s.TimeMs < 0 || s.TimeMs > MaxTimeMs {
		return invalid("checker.special.timeMs", "must be 1..%d (absent means the node's checker time)", MaxTimeMs)
	}
	if m.IO != nil && (m.IO.InputFile != "" || m.IO.OutputFile != "" || m.IO.Stdio) {
		return invalid("io", "an interactive problem talks over stdin and stdout: no input or output file")
	}
	return nil
}
