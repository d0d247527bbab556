// Command kece-bench measures the judge pool and prints key=value figures
// with the baseline they are compared to, measured in the same run.
//
//	kece-bench scheduler [flags]   durable scheduling throughput vs the commit-rate bound
//	kece-bench sandbox [flags]     code engine per-case cost vs native exec and container per case
//	kece-bench failover [flags]    time from killing a node mid-job (silent, or restarted) to the job running again
//	kece-bench burst [flags]       capacity report: a burst of n submissions on real nodes vs C/T
//	kece-bench footprint [flags]   memory with 100k queued jobs and claim latency with that backlog
//	kece-bench timing [flags]      CPU-time verdicts vs burners' own clocks (contradictions, error)
//	kece-bench chaos [flags]       seeded faults on a fleet (kills, freezes, DB restarts, dropped answers); -galera: Galera node kill
//	kece-bench verdict [flags]     time to verdict per language and problem kind vs the same commands run natively
//	kece-bench all                 every benchmark with default flags
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kece-oj/kece/cmd/internal/settings"
	"github.com/kece-oj/kece/internal/buildinfo"
)

type command struct {
	name string
	help string
	run  func(ctx context.Context, args []string) error
}

// byHand are not part of `all`: minutes long, they run the whole fleet.
var byHand = map[string]bool{"burst": true, "footprint": true, "chaos": true, "verdict": true}

func commands() []command {
	return []command{
		{"scheduler", "durable lifecycles/s against the machine's commit rate", runScheduler},
		{"sandbox", "code engine per-case cost vs native exec and container per case", runSandbox},
		{"failover", "kill a kece-node mid-job (dead, or restarted): time until the job runs again, vs heartbeat TTL + reap + 1s / 2s + process start", runFailover},
		{"pickup", "claim long-poll pickup latency, same vs cross replica, against the ready-claim floor", runPickup},
		{"burst", "capacity report: n submissions at once through the business API on real nodes, completions/s vs C/T", runBurst},
		{"footprint", "control RSS idle and with 100k queued, claim latency with that backlog vs empty, node RSS idle per pool", runFootprint},
		{"chaos", "faults on a running fleet (or -galera: a killed cluster node): lost, duplicated, stuck, wrong, reconcile violations, recovery", runChaos},
		{"timing", "CPU-time verdicts at 90-110 % of the limit vs the burners' own clocks, quiet and loaded", runTiming},
		{"verdict", "time from enqueue to verdict per language and problem kind (latency, throughput, rejudge) vs the same commands run natively", runVerdict},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	switch name {
	case "version", "--version", "-version":
		fmt.Println(buildinfo.String("kece-bench"))
		return
	case "help", "-h", "--help":
		usageTo(os.Stdout)
		return
	}
	if name == "all" {
		for _, c := range commands() {
			if byHand[c.name] {
				continue
			}
			fmt.Printf("# %s\n", c.name)
			if err := c.run(ctx, nil); err != nil {
				fmt.Fprintf(os.Stderr, "kece-bench %s: %v\n", c.name, err)
				os.Exit(1)
			}
		}
		return
	}
	for _, c := range commands() {
		if c.name == name {
			err := c.run(ctx, args)
			switch {
			case err == nil, errors.Is(err, flag.ErrHelp):
				// -h printed the benchmark's flags.
				return
			case settings.IsConfigError(err):
				fmt.Fprintf(os.Stderr, "kece-bench %s: %v\n", name, err)
				os.Exit(settings.ExitConfig)
			}
			fmt.Fprintf(os.Stderr, "kece-bench %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "kece-bench: unknown benchmark %q\n", name)
	usage()
	os.Exit(2)
}

func usage() { usageTo(os.Stderr) }

func usageTo(w io.Writer) {
	fmt.Fprintln(w, "usage: kece-bench <benchmark> [flags]   (kece-bench <benchmark> -h for flags)")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.help)
	}
	fmt.Fprintln(w, "  all        run every benchmark except burst, footprint, chaos and verdict (run those by hand)")
	fmt.Fprintln(w, "  version    print the build version (also --version)")
}
