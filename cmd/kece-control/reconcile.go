package main

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/control/store"
)

var reconcileFormats = []string{"json", "yaml", "table", "csv"}

// reconcile checks the scheduling invariants (control/store/reconcile.go)
// and prints the report. violated is true when any rule found a violation;
// the process then exits 3 (as kecectl reconcile) so scripts and alerts notice.
func reconcileCommand(cio cmdIO) *cobra.Command {
	fs := settings.NewFlagSet("reconcile", cio.getenv)
	dsn := dbFlags(fs)
	out := outputFlag(fs, "json", reconcileFormats...)
	// --format is the pre-`-o` spelling, kept so existing cron lines work.
	format := fs.String("format", "KECE_RECONCILE_FORMAT", "", "deprecated: use -o")
	_ = fs.Flags().MarkHidden("format")
	reap := fs.Duration("reap-interval", "KECE_REAP_INTERVAL", store.ReapIntervalDefault,
		"the replicas' reap interval: a lease expired for longer than twice this is reported as a stuck reaper")
	cmd := &cobra.Command{Use: "reconcile", Short: "Check the scheduling invariants (-o json|yaml|table|csv); exit 3 on violation", Args: cobra.NoArgs}
	return clikit.Bind(cmd, fs, func(cmd *cobra.Command, _ []string) error {
		violated, err := reconcile(cmd.Context(), fs, *dsn, *out, *format, *reap, cio)
		if err == nil && violated {
			return &clikit.Exit{Code: 3} // as kecectl reconcile: ran fine, found violations
		}
		return err
	})
}

func reconcile(ctx context.Context, fs *settings.FlagSet, dsn, out, format string, reap time.Duration, cio cmdIO) (violated bool, err error) {
	if format != "" {
		if format != "json" && format != "csv" {
			return false, settings.Errorf(fs.Source("format"), "--format must be json or csv, got %q (prefer -o)", format)
		}
		out = format
	}
	if err := checkOutput(fs, out, reconcileFormats...); err != nil {
		return false, err
	}
	db, err := openDB(ctx, fs, dsn, 2)
	if err != nil {
		return false, err
	}
	defer db.Close()
	st, err := store.New(db, store.Config{})
	if err != nil {
		return false, err
	}
	rep, err := st.ReconcileWith(ctx, store.ReconcileOptions{ReapInterval: reap})
	if err != nil {
		return false, err
	}
	switch out {
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
