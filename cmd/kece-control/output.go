package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/kece-oj/kece/cmd/internal/settings"
)

// outputFlag registers -o/--output (KECE_OUTPUT), the one output flag of
// every listing, as in kecectl.
func outputFlag(fs *settings.FlagSet, def string, formats ...string) *string {
	return fs.StringP("output", "o", "KECE_OUTPUT", def, "output format: "+strings.Join(formats, ", "))
}

func checkOutput(fs *settings.FlagSet, got string, formats ...string) error {
	if !slices.Contains(formats, got) {
		return settings.Errorf(fs.Source("output"), "%q is not an output format; use one of %s", got, strings.Join(formats, ", "))
	}
	return nil
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return nil
}

// writeYAML writes v as YAML with the same field names as its JSON (it
// goes through JSON so the json tags decide the keys).
func writeYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(generic); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return enc.Close()
}

// writeTable writes rows under a header, aligned.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
