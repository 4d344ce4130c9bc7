package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPhasesTestsTimeTheBenchBodies: idb's phases tests (which need the
// package's internals, so cannot import this program) keep copies of the
// raw JavaScript transaction bodies timed here; they must stay the same.
func TestPhasesTestsTimeTheBenchBodies(t *testing.T) {
	ours := stringConsts(t, "bench_js.go")
	theirs := stringConsts(t, "../../../../idb/perf_js_test.go")
	for _, name := range []string{"benchStore", "benchApplyPre", "benchAllocateBody", "benchApplyBody"} {
		require.NotEmpty(t, ours[name], name)
		require.Equal(t, ours[name], theirs[name], "%s differs between the bench and idb's phases tests", name)
	}
}

// stringConsts are the string constants declared in a Go file.
func stringConsts(t *testing.T, path string) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[name.Name] = s
				}
			}
		}
		return true
	})
	return out
}
