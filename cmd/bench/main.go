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
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/tabfence/tabfence/cmd/bench/browserbench"
	"github.com/tabfence/tabfence/cmd/bench/outboxbench"
	"github.com/tabfence/tabfence/cmd/bench/serverbench"
	"github.com/tabfence/tabfence/cmd/bench/wasmsize"
)

func main() {
	dist := flag.String("dist", "dist", "directory with the built runtime (make build)")
	only := flag.String("only", "", "run one part: browser (which includes fence), fence, serving, watchdog, outbox, server or size")
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
	if *only == "" || *only == "serving" {
		fmt.Println("== serving: the runtime on the wire, first and repeat visit (headless Chromium, tabfence serve) ==")
		if err := browserbench.RunServing(ctx, os.Stdout, *dist); err != nil {
			fmt.Fprintln(os.Stderr, "serving bench:", err)
			fail = true
		}
	}
	if *only == "fence" {
		fmt.Println("== fencing and channel round trip (headless Chromium) ==")
		if err := browserbench.RunFence(ctx, os.Stdout, *dist); err != nil {
			fmt.Fprintln(os.Stderr, "fence bench:", err)
			fail = true
		}
	}
	if *only == "" || *only == "watchdog" {
		fmt.Println("== election watchdog (headless Chromium) ==")
		if err := browserbench.RunWatchdog(ctx, os.Stdout, *dist); err != nil {
			fmt.Fprintln(os.Stderr, "watchdog bench:", err)
			fail = true
		}
	}
	if *only == "" || *only == "outbox" {
		fmt.Println("== outbox (headless Chromium, in-process receiver on loopback) ==")
		if err := outboxbench.Run(ctx, os.Stdout, *dist); err != nil {
			fmt.Fprintln(os.Stderr, "outbox bench:", err)
			fail = true
		}
	}
	if *only == "" || *only == "size" {
		fmt.Println("== tabfence.wasm code by package (unstripped build; the download is stripped and compressed) ==")
		if err := sizeReport(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "size report:", err)
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

// sizeReport builds the runtime with its symbol names kept and prints which
// packages its code comes from: every import is downloaded by every user,
// so a size change should be traceable to the package that made it.
func sizeReport(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "tabfence-size")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "tabfence.wasm")
	gcflags, err := makefileGCFlags("Makefile")
	if err != nil {
		return err
	}
	args := append([]string{"build", "-trimpath"}, gcflags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", out, "./wasm")...)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	rep, err := wasmsize.Analyze(out)
	if err != nil {
		return err
	}
	rep.Print(os.Stdout, 15)
	rep.PrintFuncs(os.Stdout, 15, "")
	return nil
}

// makefileGCFlags returns the Makefile's WASM_GCFLAGS, the compiler flags
// dist/tabfence.wasm is built with, so the report attributes the code that
// ships (inlining changes which functions exist and how big they are).
func makefileGCFlags(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "WASM_GCFLAGS :="); ok {
			return strings.Fields(v), nil
		}
	}
	return nil, fmt.Errorf("%s: no WASM_GCFLAGS line", path)
}
