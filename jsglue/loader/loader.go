// Package loader holds the ES module loader (tabfence.js) and its types
// (tabfence.d.ts) that `make build` copies to dist/, embedded for the
// browser tests: they install the loader's fast path (FAST) in a test page
// as the loader installs it in a real one, from this very file, so no copy
// of it can drift from what pages run.
package loader

import (
	_ "embed"
	"strings"
)

// Module is the source of tabfence.js.
//
//go:embed tabfence.js
var Module string

// FastPath returns the JavaScript expression of the loader's FAST object
// (the text after "const FAST = " up to the statement's end), or "" if the
// module no longer has it in that form.
func FastPath() string {
	const start, end = "\nconst FAST = ", "\n})();\n"
	i := strings.Index(Module, start)
	if i < 0 {
		return ""
	}
	rest := Module[i+len(start):]
	j := strings.Index(rest, end)
	if j < 0 {
		return ""
	}
	return rest[:j+len("\n})()")]
}
