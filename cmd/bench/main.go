// Command bench prints tabfence's figures, each beside the raw-JavaScript or
// plain-Go baseline measured in the same run, because absolute times on a
// shared machine drift while ratios hold, and writes their tables to
// docs/figures.md (package figures). `make bench` runs it with a throwaway
// PostgreSQL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/tabfence/tabfence/cmd/bench/browserbench"
	"github.com/tabfence/tabfence/cmd/bench/connbench"
	"github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/cmd/bench/outboxbench"
	"github.com/tabfence/tabfence/cmd/bench/serverbench"
	"github.com/tabfence/tabfence/cmd/bench/swbench"
	"github.com/tabfence/tabfence/cmd/bench/wasmsize"
	"github.com/tabfence/tabfence/e2e/harness"
)

// A part of the bench: -only names it by key, and figures.md has a section
// per key.
type part struct {
	key, title string
	run        func(ctx context.Context, w io.Writer) error
}

func parts(dist string) []part {
	return []part{
		{"browser", "browser runtime (headless Chromium)", func(ctx context.Context, w io.Writer) error { return browserbench.Run(ctx, w, dist) }},
		{"firefox", "browser runtime in Firefox ESR (headless, WebDriver BiDi)", func(ctx context.Context, w io.Writer) error { return browserbench.RunFirefox(ctx, w, dist) }},
		{"fence", "fencing and channel round trip (headless Chromium)", func(ctx context.Context, w io.Writer) error { return browserbench.RunFence(ctx, w, dist) }},
		{"serving", "serving: the runtime on the wire, first and repeat visit (headless Chromium, tabfence serve)", func(ctx context.Context, w io.Writer) error { return browserbench.RunServing(ctx, w, dist) }},
		{"watchdog", "election watchdog (headless Chromium)", func(ctx context.Context, w io.Writer) error { return browserbench.RunWatchdog(ctx, w, dist) }},
		{"memory", "memory per tab (headless Chromium)", func(ctx context.Context, w io.Writer) error { return browserbench.RunMemory(ctx, w, dist) }},
		{"outbox", "outbox (headless Chromium, in-process receiver on loopback)", func(ctx context.Context, w io.Writer) error { return outboxbench.Run(ctx, w, dist) }},
		{"sw", "Background Sync: a Service Worker drains the outbox (headless Chromium, demo server and its worker in-process on loopback)", func(ctx context.Context, w io.Writer) error { return swbench.Run(ctx, w, dist) }},
		{"connection", "realtime connection: one socket per browser (headless Chromium, receiver/realtime endpoint in-process)", func(ctx context.Context, w io.Writer) error {
			gcflags, err := makefileGCFlags("Makefile")
			if err != nil {
				return err
			}
			return connbench.Run(ctx, w, dist, gcflags)
		}},
		{"size", "tabfence.wasm code by package (unstripped build; the download is stripped and compressed)", func(ctx context.Context, w io.Writer) error { return sizeReport(ctx, w) }},
		{"server", "server receiver", func(ctx context.Context, w io.Writer) error {
			return serverbench.Run(ctx, w, os.Getenv("TABFENCE_PG_URL"))
		}},
	}
}

func main() {
	dist := flag.String("dist", "dist", "directory with the built runtime (make build)")
	only := flag.String("only", "", "run one part: browser, firefox, fence, serving, watchdog, memory, outbox, sw, connection, size or server")
	out := flag.String("figures", "docs/figures.md", "the file the figures are written to (the sections run replace theirs); empty: print only")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	load := loadAverage() // before the bench adds its own
	rec := figures.NewRecorder(os.Stdout)
	var order []string
	fail := false
	for _, p := range parts(*dist) {
		order = append(order, p.key)
		if *only != "" && *only != p.key {
			continue
		}
		s := rec.Section(p.key, p.title)
		if err := p.run(ctx, rec); err != nil {
			fmt.Fprintln(os.Stderr, p.key+" bench:", err)
			s.Failed, fail = true, true
		} else if len(s.Tables) == 0 {
			fmt.Fprintln(os.Stderr, p.key+" bench: printed no table, so figures.md keeps its last block")
		}
		if ctx.Err() != nil {
			break // interrupted: run no more parts
		}
	}
	if len(rec.Sections()) == 0 {
		fmt.Fprintf(os.Stderr, "bench: no part %q (one of %s)\n", *only, strings.Join(order, ", "))
		os.Exit(2)
	}
	if *out != "" {
		if err := writeFigures(*out, rec, order, load); err != nil {
			fmt.Fprintln(os.Stderr, "figures:", err)
			fail = true
		}
	}
	if fail {
		os.Exit(1)
	}
}

// writeFigures rewrites path with the sections run (figures.Render).
func writeFigures(path string, rec *figures.Recorder, order []string, load string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	run := figures.Run{At: time.Now(), Machine: machine(load), Command: strings.TrimSpace("go run ./cmd/bench " + strings.Join(os.Args[1:], " "))}
	// A new file renamed over the old: an interrupted write leaves the old.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(figures.Render(run, rec.Sections(), order, string(old))), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadAverage is the machine's one-minute load average, or "" where
// /proc/loadavg is missing.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// machine says what the figures were measured on: cores, OS, browser, Go,
// and how busy the machine was when the bench started.
func machine(load string) string {
	osName := runtime.GOOS
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		if m := regexp.MustCompile(`(?m)^PRETTY_NAME="?([^"\n]*)"?$`).FindSubmatch(b); m != nil {
			osName = string(m[1])
		}
	}
	browser := "no Chromium found"
	if v, err := exec.Command(harness.Chromium, "--version").Output(); err == nil {
		browser, _, _ = strings.Cut(strings.TrimSpace(string(v)), " built on ")
	}
	m := fmt.Sprintf("%d cores, %s, %s, %s", runtime.NumCPU(), osName, browser, runtime.Version())
	if load != "" {
		m += " (load average " + load + " at the start)"
	}
	return m
}

// sizeReport builds the runtime with its symbol names kept and prints which
// packages its code comes from: every import is downloaded by every user,
// so a size change should be traceable to the package that made it.
func sizeReport(ctx context.Context, w io.Writer) error {
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
	rep.Print(w, 15)
	rep.PrintFuncs(w, 15, "")
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
