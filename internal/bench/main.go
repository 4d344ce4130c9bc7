// Command bench prints tabfence's figures, each beside the raw-JavaScript or
// plain-Go baseline measured in the same run, because absolute times on a
// shared machine drift while ratios hold. `make bench` runs it with a
// throwaway PostgreSQL.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/tabfence/tabfence/internal/bench/browserbench"
	"github.com/tabfence/tabfence/internal/bench/serverbench"
)

func main() {
	dist := flag.String("dist", "dist", "directory with the built runtime (make build)")
	only := flag.String("only", "", "run one part: browser or server")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fail := false
	if *only == "" || *only == "browser" {
		fmt.Println("== browser runtime (headless Chromium) ==")
		if err := browserbench.Run(ctx, os.Stdout, *dist); err != nil {
			fmt.Fprintln(os.Stderr, "browser bench:", err)
			fail = true
		}
	}
	if *only == "" || *only == "server" {
		fmt.Println("== server receiver ==")
		if err := serverbench.Run(ctx, os.Stdout, os.Getenv("TABFENCE_PG_URL")); err != nil {
			fmt.Fprintln(os.Stderr, "server bench:", err)
			fail = true
		}
	}
	if fail {
		os.Exit(1)
	}
}
