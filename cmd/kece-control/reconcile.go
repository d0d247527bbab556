package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/store"
)

// reconcile checks the scheduling invariants (control/store/reconcile.go)
// and prints the report as JSON or CSV. violated is true when any rule
// found a violation; the process then exits 3 (as kecectl reconcile) so
// scripts and alerts notice.
func reconcile(ctx context.Context, args []string, stdout io.Writer) (violated bool, err error) {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	var env envReader
	dsn := dsnFlag(fs)
	format := fs.String("format", "json", "json or csv (same as -o)")
	// -o/--output is the output flag of every KECE CLI; --format stays for scripts.
	fs.StringVar(format, "o", "json", "output: json or csv")
	fs.StringVar(format, "output", "json", "output: json or csv")
	reap := fs.Duration("reap-interval", env.duration("KECE_REAP_INTERVAL", httpapi.ReapIntervalDefault),
		"the replicas' reap interval: a lease expired for longer than twice this is reported as a stuck reaper")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if err := env.err(); err != nil {
		return false, err
	}
	if *format != "json" && *format != "csv" {
		return false, usagef("--format must be json or csv, got %q", *format)
	}
	db, err := openDB(ctx, *dsn, 2)
	if err != nil {
		return false, err
	}
	defer db.Close()
	st, err := store.New(db, store.Config{})
	if err != nil {
		return false, err
	}
	rep, err := st.ReconcileWith(ctx, store.ReconcileOptions{ReapInterval: *reap})
	if err != nil {
		return false, err
	}
	switch *format {
	case "csv":
		if err := rep.WriteCSV(stdout); err != nil {
			return false, err
		}
	default:
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return false, fmt.Errorf("encode report: %w", err)
		}
	}
	return !rep.OK(), nil
}
