package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/migrations"
)

func migrate(ctx context.Context, args []string, cio cmdIO) error {
	fs := settings.NewFlagSet("migrate", cio.getenv)
	fs.SetOutput(cio.stdout)
	dsn := dbFlags(fs)
	// Accept the action before or after the flags.
	var action string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if action == "" && fs.NArg() == 1 {
		action = fs.Arg(0)
	} else if fs.NArg() != 0 || action == "" {
		return usagef("say up, down or status")
	}
	if action != "up" && action != "down" && action != "status" {
		return usagef("unknown migrate action %q: say up, down or status", action)
	}
	db, err := openDB(ctx, fs, *dsn, 2)
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
