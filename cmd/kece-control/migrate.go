package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kece-oj/kece/cmd/internal/clikit"
	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/migrations"
)

func migrateCommand(cio cmdIO) *cobra.Command {
	group := &cobra.Command{Use: "migrate", Short: "Apply, roll back or list the schema migrations"}
	var subs []*cobra.Command
	for _, a := range []struct{ use, short string }{
		{"up", "Apply every pending migration (under the migration lock)"},
		{"down", "Roll back the newest migration"},
		{"status", "List the migrations and whether each is applied"},
	} {
		fs := settings.NewFlagSet("migrate "+a.use, cio.getenv)
		dsn := dbFlags(fs)
		action := a.use
		subs = append(subs, clikit.Bind(&cobra.Command{Use: a.use, Short: a.short, Args: cobra.NoArgs}, fs,
			func(cmd *cobra.Command, _ []string) error { return migrate(cmd.Context(), fs, *dsn, action, cio) }))
	}
	return clikit.Group(group, subs...)
}

func migrate(ctx context.Context, fs *settings.FlagSet, dsn, action string, cio cmdIO) error {
	db, err := openDB(ctx, fs, dsn, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	p, err := migrations.Provider(db)
	if err != nil {
		return err
	}
	switch action {
	case "up":
		unlock, err := migrations.Lock(ctx, db)
		if err != nil {
			return err
		}
		defer unlock()
		res, err := p.Up(ctx)
		for _, r := range res {
			fmt.Fprintf(cio.stdout, "applied %s (%s)\n", r.Source.Path, r.Duration)
		}
		if err != nil {
			return err
		}
		if len(res) == 0 {
			fmt.Fprintln(cio.stdout, "schema is up to date")
		}
	case "down":
		r, err := p.Down(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(cio.stdout, "rolled back %s\n", r.Source.Path)
	case "status":
		st, err := p.Status(ctx)
		if err != nil {
			return err
		}
		for _, s := range st {
			fmt.Fprintf(cio.stdout, "%-8s %s\n", s.State, s.Source.Path)
		}
	}
	return nil
}
