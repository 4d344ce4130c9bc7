// Command shape prints the project's shape and checks it: non-test lines
// per package, files and functions over their limits, the import layering
// (layers.go), and exported API that names an internal package's type. It
// exits 1 on any violation. From the module root: go run ./cmd/shape (make
// shape).
//
// A function over the limit is let off when it is a table: its lines
// outside data literals (composite literals of literals, names and other
// such literals; see dataLines) are within the limit. Such functions are
// listed apart.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

type limits struct{ pkg, file, fn int }

func main() {
	var lim limits
	flag.IntVar(&lim.pkg, "pkg", 3000, "max non-test lines per package")
	flag.IntVar(&lim.file, "file", 600, "max lines per non-test file")
	flag.IntVar(&lim.fn, "func", 80, "max lines per function, outside data tables")
	root := flag.String("root", ".", "the module's root")
	flag.Parse()
	t, err := scan(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(2)
	}
	if n := t.print(os.Stdout, lim); n > 0 {
		fmt.Printf("%d violations\n", n)
		os.Exit(1)
	}
}

// print writes the report and returns how many violations it lists.
func (t *tree) print(w io.Writer, lim limits) int {
	bad := 0
	pkgs := sortedKeys(t.pkgs)
	sort.SliceStable(pkgs, func(i, j int) bool { return t.pkgs[pkgs[i]] > t.pkgs[pkgs[j]] })
	fmt.Fprintf(w, "packages (non-test lines, limit %d):\n", lim.pkg)
	for _, p := range pkgs {
		mark := ""
		if t.pkgs[p] > lim.pkg {
			mark, bad = "  OVER", bad+1
		}
		fmt.Fprintf(w, "  %6d  %s%s\n", t.pkgs[p], p, mark)
	}
	var files []string
	for _, f := range sortedKeys(t.files) {
		if t.files[f] > lim.file {
			files = append(files, fmt.Sprintf("%s %d", f, t.files[f]))
		}
	}
	bad += section(w, fmt.Sprintf("files over %d lines", lim.file), files)
	var long, tables []string
	for _, f := range t.funcs {
		switch {
		case f.code > lim.fn:
			long = append(long, fmt.Sprintf("%s %d", f.where, f.lines))
		case f.lines > lim.fn:
			tables = append(tables, fmt.Sprintf("%s %d (%d outside tables)", f.where, f.lines, f.code))
		}
	}
	sort.Strings(long)
	sort.Strings(tables)
	bad += section(w, fmt.Sprintf("functions over %d lines", lim.fn), long)
	if len(tables) > 0 {
		fmt.Fprintf(w, "tables over %d lines (let off):\n", lim.fn)
		for _, s := range tables {
			fmt.Fprintln(w, "  ", s)
		}
	}
	bad += section(w, "layering violations", checkLayers(t.imports, t.tests))
	bad += section(w, "native programs reaching syscall/js", checkNative(t.native))
	sort.Strings(t.exposed)
	bad += section(w, "exported API naming internal types", t.exposed)
	return bad
}

// section prints a heading with its count and the items, and returns the count.
func section(w io.Writer, title string, items []string) int {
	fmt.Fprintf(w, "%s: %d\n", title, len(items))
	for _, s := range items {
		fmt.Fprintln(w, "  ", s)
	}
	return len(items)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
