package main

import (
	"path"
	"slices"
	"sort"
	"strings"
)

// A layer is a group of the module's packages (by path prefix, relative to
// the module) and the layers it may import. Inside one layer packages may
// import each other (Go refuses cycles); every other import between the
// module's packages must go down this table. A package in no layer is a
// violation too: a new package takes its place here, on purpose.
type layer struct {
	name     string
	prefixes []string // "x" holds x and every package below it
	may      []string // the layers it may import
	tier     string   // layers side by side: their tests may import each other
}

// layers is the import graph the project keeps, bottom up: private helpers
// and the wire contract; jsglue (the syscall/js glue, and the loader's
// interface below it); the browser APIs, each on its own (idb's fencing
// database on the raw IndexedDB layer, idb/raw); the outbox's record core
// (outbox/queue), which imports nothing of the outbox; the outbox; the
// realtime connection's client core; the JS API. The server half
// (receiver, and assets, which serves the built runtime) stands beside them
// on the helpers alone; the realtime client core and the receiver share a
// tier so the tests of either half may run against the other;
// programs (cmd, e2e) sit on top. A package's layer is the one with its
// longest matching prefix.
var layers = []layer{
	{name: "helpers", prefixes: []string{"internal", "wire"}},
	{name: "jsglue", prefixes: []string{"jsglue"}, may: []string{"helpers"}},
	{name: "locks", prefixes: []string{"locks"}, may: []string{"helpers", "jsglue"}, tier: "browser APIs"},
	{name: "channel", prefixes: []string{"channel"}, may: []string{"helpers", "jsglue"}, tier: "browser APIs"},
	{name: "idb/raw", prefixes: []string{"idb/raw"}, may: []string{"helpers", "jsglue"}},
	{name: "idb", prefixes: []string{"idb"}, may: []string{"helpers", "jsglue", "idb/raw"}, tier: "browser APIs"},
	{name: "queue", prefixes: []string{"outbox/queue"}, may: []string{"helpers", "jsglue", "locks"}},
	{name: "outbox", prefixes: []string{"outbox"}, may: []string{"helpers", "jsglue", "locks", "channel", "idb/raw", "idb", "queue"}},
	{name: "realtime", prefixes: []string{"realtime"}, may: []string{"helpers", "jsglue", "locks", "channel", "idb/raw", "idb", "queue", "outbox"}, tier: "connection halves"},
	{name: "wasm", prefixes: []string{"wasm"}, may: []string{"helpers", "jsglue", "locks", "channel", "idb/raw", "idb", "queue", "outbox", "realtime"}},
	{name: "receiver", prefixes: []string{"receiver", "assets"}, may: []string{"helpers"}, tier: "connection halves"},
	{name: "programs", prefixes: []string{"cmd", "e2e"}, may: []string{"helpers", "jsglue", "locks", "channel", "idb/raw", "idb", "queue", "outbox", "realtime", "wasm", "receiver"}},
}

// nativeOnly are the layers built for the server or the command line: in
// a native build nothing they import, directly or not, imports syscall/js.
// (A wasm program among them, such as the bench's idbbench, is built for
// js/wasm and is not held to this.)
var nativeOnly = []string{"receiver", "programs"}

// layerOf is the layer of a package path relative to the module, or nil:
// the layer of its longest matching prefix (idb/raw/x is idb/raw's, not
// idb's).
func layerOf(rel string) *layer {
	var best *layer
	n := 0
	for i := range layers {
		for _, p := range layers[i].prefixes {
			if (rel == p || strings.HasPrefix(rel, p+"/")) && len(p) > n {
				best, n = &layers[i], len(p)
			}
		}
	}
	return best
}

func (l *layer) allows(other *layer, test bool) bool {
	if l == other || test && l.tier != "" && l.tier == other.tier {
		return true
	}
	return slices.Contains(l.may, other.name)
}

// checkLayers lists every import between the module's packages that the
// table forbids, and every package the table does not place. code and
// tests map a package (relative path) to the module packages that its
// non-test and its test files import: a test may not reach up either.
func checkLayers(code, tests map[string]map[string]bool) []string {
	var bad []string
	seen := map[string]bool{}
	for _, g := range []struct {
		imports map[string]map[string]bool
		test    bool
	}{{code, false}, {tests, true}} {
		for pkg, deps := range g.imports {
			from := layerOf(pkg)
			if from == nil {
				if !seen[pkg] {
					bad = append(bad, pkg+": in no layer (add it to cmd/shape's layer table)")
				}
				seen[pkg] = true
				continue
			}
			for dep := range deps {
				if to := layerOf(dep); to != nil && !from.allows(to, g.test) {
					bad = append(bad, pkg+" ("+from.name+") imports "+dep+" ("+to.name+")"+map[bool]string{true: " in a test"}[g.test])
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// checkNative lists the packages of the nativeOnly layers whose native
// build reaches syscall/js. native maps a package to what its files import
// in a native build (module packages relative, others as they are).
func checkNative(native map[string][]string) []string {
	var bad []string
	for pkg := range native {
		l := layerOf(pkg)
		if l == nil || !slices.Contains(nativeOnly, l.name) {
			continue
		}
		if via := reaches(native, pkg, "syscall/js", map[string]bool{}); via != nil {
			bad = append(bad, pkg+" reaches syscall/js in a native build: "+strings.Join(via, " -> "))
		}
	}
	sort.Strings(bad)
	return bad
}

// reaches is the import path from pkg to target in graph, or nil.
func reaches(graph map[string][]string, pkg, target string, seen map[string]bool) []string {
	if seen[pkg] {
		return nil
	}
	seen[pkg] = true
	for _, dep := range graph[pkg] {
		if dep == target {
			return []string{pkg, dep}
		}
		if _, ok := graph[dep]; ok {
			if via := reaches(graph, dep, target, seen); via != nil {
				return append([]string{pkg}, via...)
			}
		}
	}
	return nil
}

// rel is a module import path relative to the module ("" for its root), and
// whether it is one of the module's.
func rel(module, importPath string) (string, bool) {
	if importPath == module {
		return ".", true
	}
	if strings.HasPrefix(importPath, module+"/") {
		return path.Clean(strings.TrimPrefix(importPath, module+"/")), true
	}
	return "", false
}
