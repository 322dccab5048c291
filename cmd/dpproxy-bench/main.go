// Command dpproxy-bench measures dpproxy's planner and sources: strategy
// quality against the SVD bound, fairness and accuracy targets, a wide
// dashboard in marginal space, and histogram builds against each engine's
// own GROUP BY. It is a developer's tool, kept out of the shipped dpproxy
// binary (it links internal/testdb, which starts database servers):
//
//	go run ./cmd/dpproxy-bench planner --workload allrange --domain 1024
//	go run ./cmd/dpproxy-bench all --json bench.json
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/dpproxy/dpproxy/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "planner":
		err = benchPlanner(rest, stdout)
	case "fairness":
		err = benchFairness(rest, stdout)
	case "target":
		err = benchTarget(rest, stdout)
	case "wide":
		err = benchWide(rest, stdout)
	case "source":
		err = benchSource(ctx, rest, stdout)
	case "all":
		err = benchAll(ctx, rest, stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "dpproxy-bench: unknown benchmark %q\n", cmd)
		usage(stderr)
		return 2
	}
	return cli.Status(stderr, "dpproxy-bench", err)
}

// exitError ends the command with its code (see package cli).
type exitError = cli.ExitError

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: go run ./cmd/dpproxy-bench <benchmark> [flags]

benchmarks:
  planner   --workload allrange|prefix|marginals2|marginals3 --domain 1024|256x256|8x8x8x8x8|10^100
            [--noise laplace|gaussian] [--json]: the planner's strategies, errors and planning times
  fairness  [--noise laplace|gaussian]: each answer of mixed batches against its fair share
  target    [--noise laplace|gaussian]: the ε of accuracy targets for the README's queries and dashboards
  wide      [--rows N]: a 20-column dashboard in marginal space against SQLite's exact GROUP BYs
  source    --rows N [--start-servers] [--postgres DSN] [--mysql DSN]: histogram build times against
            each engine's own GROUP BY, and peak memory per cell
  all       [--full] [--json FILE] [--only REGEXP]: the speed suite (go test -bench of the packages'
            benchmarks, small sizes unless --full), every figure as a ratio against its baseline

Run 'go run ./cmd/dpproxy-bench <benchmark> -h' for its flags.
`)
}

// defaultDataDir is where `source` keeps its generated SQLite files between
// runs (under bench/), beside dpproxy's own default data directory.
func defaultDataDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "dpproxy")
	}
	return filepath.Join(os.TempDir(), "dpproxy")
}
