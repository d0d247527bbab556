package main

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/httpapi"
	"github.com/kece-oj/kece/control/store"
)

var reconcileFormats = []string{"json", "yaml", "table", "csv"}

// reconcile checks the scheduling invariants (control/store/reconcile.go)
// and prints the report. violated is true when any rule found a violation;
// the process then exits 3 (as kecectl reconcile) so scripts and alerts notice.
func reconcile(ctx context.Context, args []string, cio cmdIO) (violated bool, err error) {
	fs := settings.NewFlagSet("reconcile", cio.getenv)
	fs.SetOutput(cio.stdout)
	dsn := dbFlags(fs)
	out := outputFlag(fs, "json", reconcileFormats...)
	// --format is the pre-`-o` spelling, kept so existing cron lines work.
	format := fs.String("format", "KECE_RECONCILE_FORMAT", "", "deprecated: use -o")
	reap := fs.Duration("reap-interval", "KECE_REAP_INTERVAL", httpapi.ReapIntervalDefault,
		"the replicas' reap interval: a lease expired for longer than twice this is reported as a stuck reaper")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, usagef("unexpected arguments %q", fs.Args())
	}
	if *format != "" {
		if *format != "json" && *format != "csv" {
			return false, settings.Errorf(fs.Source("format"), "--format must be json or csv, got %q (prefer -o)", *format)
		}
		*out = *format
	}
	if err := checkOutput(fs, *out, reconcileFormats...); err != nil {
		return false, err
	}
	db, err := openDB(ctx, fs, *dsn, 2)
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
	switch *out {
	case "csv":
		err = rep.WriteCSV(cio.stdout)
	case "yaml":
		err = writeYAML(cio.stdout, rep)
	case "table":
		rows := make([][]string, 0, len(rep.Violations))
		for _, v := range rep.Violations {
			var d []byte
			if len(v.Details) > 0 {
				d, _ = json.Marshal(v.Details)
			}
			rows = append(rows, []string{v.Rule, v.SubjectType, strconv.FormatInt(v.SubjectID, 10), v.Message, string(d)})
		}
		if len(rows) == 0 {
			rows = append(rows, []string{"(none)", "", "", "all " + strconv.Itoa(len(rep.Rules)) + " rules hold as of " + rep.AsOf.UTC().Format("2006-01-02T15:04:05Z"), ""})
		}
		err = writeTable(cio.stdout, []string{"RULE", "SUBJECT", "ID", "MESSAGE", "DETAILS"}, rows)
	default:
		err = writeJSON(cio.stdout, rep)
	}
	if err != nil {
		return false, err
	}
	return !rep.OK(), nil
}
