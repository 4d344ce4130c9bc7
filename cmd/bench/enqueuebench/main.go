// Command enqueuebench runs the outbox enqueue figure of `make bench` alone
// (see outboxbench.RunEnqueue), for quick iteration.
package main

import (
	"context"
	"flag"
	"log"
	"net/url"
	"os"

	"github.com/tabfence/tabfence/cmd/bench/outboxbench"
)

func main() {
	dist := flag.String("dist", "dist", "directory with the built runtime (make build)")
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	prof := flag.String("profile", "", "directory for a Chromium CPU profile of the first enqueue round")
	probe := flag.String("probe", "", "file with JavaScript run in the enqueue tab before the loop; window.__probe is printed after")
	eval := flag.String("eval", "", "file with a JavaScript expression evaluated (awaited) in the demo page; its string result is printed")
	ab := flag.String("ab", "", "a second dist directory: compare it (B) with -dist (A), alternating, -rounds rounds")
	figure := flag.String("figure", "enqueue", "with -ab: the figure to compare: enqueue, flush or flush8")
	flushProf := flag.Int("flushprofile", 0, "profile only the flush of this many entities (-1: the raw fetch loop), into -profile")
	delay := flag.Duration("delay", 0, "with -eval: the server holds each POST /api/notes this long (a receiver that far away)")
	page := flag.String("page", "", "with -eval: the demo page's extra parameters (a query: batch=1&batchMax=100)")
	frozen := flag.Int("frozen", 0, "run only the frozen-owner figure, this many runs (rounded up to the bench's runs per group)")
	flag.Parse()
	if *frozen > 0 {
		if err := outboxbench.RunFrozen(context.Background(), os.Stdout, *dist, *frozen); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *flushProf != 0 { // -1: the raw fetch loop
		if err := outboxbench.RunFlushProfile(context.Background(), os.Stdout, *dist, *flushProf, *prof); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *ab != "" {
		if err := outboxbench.RunAB(context.Background(), os.Stdout, *figure, *dist, *ab, *rounds, *prof); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *eval != "" {
		b, err := os.ReadFile(*eval)
		if err != nil {
			log.Fatal(err)
		}
		q, err := url.ParseQuery(*page)
		if err != nil {
			log.Fatal(err)
		}
		if err := outboxbench.EvalInPage(context.Background(), os.Stdout, *dist, string(b), *prof, *delay, q); err != nil {
			log.Fatal(err)
		}
		return
	}
	var js string
	if *probe != "" {
		b, err := os.ReadFile(*probe)
		if err != nil {
			log.Fatal(err)
		}
		js = string(b)
	}
	if err := outboxbench.RunEnqueue(context.Background(), os.Stdout, *dist, *rounds, *prof, js); err != nil {
		log.Fatal(err)
	}
}
