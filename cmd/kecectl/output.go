package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"
)

// outputFormat is the value of -o: one flag for every command.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
	outputYAML  outputFormat = "yaml"
)

var outputFormats = []string{string(outputTable), string(outputJSON), string(outputYAML)}

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }
func (o *outputFormat) Set(s string) error {
	switch f := outputFormat(strings.ToLower(s)); f {
	case outputTable, outputJSON, outputYAML:
		*o = f
		return nil
	}
	return fmt.Errorf("%q is not an output format: want table, json or yaml", s)
}

// emit prints v as JSON or YAML (the API's own field names), or calls table
// for the human form.
func (c *cli) emit(v any, table func() error) error {
	switch c.output {
	case outputJSON:
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		return writeYAML(c, v)
	}
	return table()
}

// writeYAML goes through JSON so the keys are the API's (camelCase), in the
// API's order.
func writeYAML(c *cli, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	_, err = c.out.Write(buf.Bytes())
	return err
}

// blockStyle turns the flow style JSON parses into back into YAML's block style.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style &^= yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

func (c *cli) table() *tabwriter.Writer { return tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0) }

func row(w *tabwriter.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, v := range cols {
		parts[i] = fmt.Sprint(v)
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

func deref[T any](p *T, none string) string {
	if p == nil {
		return none
	}
	return fmt.Sprint(*p)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(ms *int64) string {
	if ms == nil {
		return "never"
	}
	return (time.Duration(*ms) * time.Millisecond).Round(time.Second).String()
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
