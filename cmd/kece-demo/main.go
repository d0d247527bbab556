// Command kece-demo runs the main job end to end on this machine, the way an
// operator and a business backend would: it starts kece-control on a fresh
// database, registers a host and one judge node per pool through the admin
// API, joins each host with `kece-node join` and starts those kece-node
// processes, verifies and enables them with `kecectl node verify|enable
// --wait`, publishes
// test data and submissions through the business API, waits for the
// verdicts, consumes the settlement events and prints what happened. It
// exits non-zero if any verdict differs from the expected one.
//
// `make demo` builds the binaries, starts the private MariaDB instances and
// Docker with the runtime images, then runs this.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := demoConfig{}
	flag.StringVar(&cfg.bin, "bin", "bin", "directory with kece-control, kece-node and kecectl")
	flag.StringVar(&cfg.work, "work", ".run/demo", "working directory for logs, credentials, caches")
	flag.StringVar(&cfg.mysql, "mysql", "root@tcp(127.0.0.1:33061)/", "control MySQL server DSN (without database)")
	flag.StringVar(&cfg.database, "database", "kece_demo", "control database to drop and create")
	flag.StringVar(&cfg.judgeMySQL, "judge-mysql", "root@tcp(127.0.0.1:33062)/", "judge MySQL server DSN for the mysql pool")
	pools := flag.String("pools", "cpp,python,java,arkts,mysql", "pools to run a node for")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.BoolVar(&cfg.keep, "keep", false, "leave control and nodes running (stop them with Ctrl-C)")
	version := flag.Bool("version", false, "print the build version and exit")
	// Every flag also reads KECE_DEMO_<FLAG> (the command line wins).
	if err := settings.ParseWithEnv(flag.CommandLine, "KECE_DEMO_", os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "kece-demo: %v\n", err)
		os.Exit(settings.ExitConfig)
	}
	if *version || flag.Arg(0) == "version" {
		fmt.Println(buildinfo.String("kece-demo"))
		return
	}
	cfg.pools = strings.Split(*pools, ",")
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	d := &demo{cfg: cfg}
	err := d.run(ctx)
	d.stopAll()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n(logs in %s)\n", err, cfg.work)
		os.Exit(1)
	}
}
