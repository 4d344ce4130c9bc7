//go:build e2e

package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Every test says which browsers it runs in: each (every engine the
// harness drives) or chromiumOnly (a CDP-only feature, named in why).
// TABFENCE_BROWSERS (comma-separated: chromium, firefox; default both)
// selects the engines a run uses.

// allKinds are the engines the harness drives, in the order tests run them.
var allKinds = []harness.Kind{harness.KindChromium, harness.KindFirefox}

// selectedKinds are the engines TABFENCE_BROWSERS names; an unknown name
// fails the test (a typo must not quietly run nothing).
func selectedKinds(t *testing.T) []harness.Kind {
	t.Helper()
	env := strings.TrimSpace(os.Getenv("TABFENCE_BROWSERS"))
	if env == "" {
		return allKinds
	}
	var out []harness.Kind
	for _, name := range strings.Split(env, ",") {
		k := harness.Kind(strings.TrimSpace(name))
		if !slices.Contains(allKinds, k) {
			t.Fatalf("TABFENCE_BROWSERS: unknown browser %q (want chromium, firefox)", name)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// each runs body as one subtest per selected engine ("chromium",
// "firefox").
func each(t *testing.T, body func(t *testing.T, k harness.Kind)) {
	t.Helper()
	for _, k := range selectedKinds(t) {
		t.Run(string(k), func(t *testing.T) { body(t, k) })
	}
}

// chromiumOnly runs body as the subtest "chromium" only; why names the
// CDP-only feature the test needs. Each other selected engine gets a
// subtest that is skipped with that reason, so a run's output counts and
// names what did not run there, never silently.
func chromiumOnly(t *testing.T, why string, body func(t *testing.T, k harness.Kind)) {
	t.Helper()
	if why == "" {
		t.Fatal("chromiumOnly needs a reason")
	}
	for _, k := range selectedKinds(t) {
		if k == harness.KindChromium {
			t.Run(string(k), func(t *testing.T) { body(t, k) })
			continue
		}
		t.Run(string(k), func(t *testing.T) { t.Skip("chromium only: " + why) })
	}
}

// TestEveryTestDeclaresItsBrowsers reads the package's test files: every
// TestXxx(t *testing.T) is one call of each or chromiumOnly whose body
// uses its Kind, every
// chromiumOnly's reason is a non-empty string literal, and docs/browsers.md
// lists exactly the chromiumOnly tests with the same reasons.
func TestEveryTestDeclaresItsBrowsers(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	only := map[string]string{} // test -> why
	n := 0
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range af.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !isTestFunc(fn) || fn.Name.Name == "TestEveryTestDeclaresItsBrowsers" {
				continue
			}
			n++
			name, why, err := declaration(fn)
			if err != "" {
				t.Errorf("%s: %s: %s", fset.Position(fn.Pos()), fn.Name.Name, err)
				continue
			}
			if name == "chromiumOnly" {
				only[fn.Name.Name] = why
			}
		}
	}
	require.NotZero(t, n, "no tests found")
	checkCatches(t)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "browsers.md"))
	require.NoError(t, err)
	require.Equal(t, only, docTable(string(doc)), "docs/browsers.md's table of Chromium-only tests is not what the tests declare")
	t.Logf("%d tests: %d in every browser, %d in Chromium only", n, n-len(only), len(only))
}

func isTestFunc(fn *ast.FuncDecl) bool {
	if !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
		return false
	}
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) > 1 { // func TestX(*testing.T) too
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}

// declaration returns which of each / chromiumOnly fn's body is, and
// chromiumOnly's reason; or what is wrong. The body is that one call, so
// nothing runs outside the subtests it declares, and the function literal
// it passes uses its Kind, so a subtest starts the browser it is named for.
func declaration(fn *ast.FuncDecl) (name, why, problem string) {
	const want = "each(t, func(t *testing.T, k harness.Kind) {...}) or chromiumOnly(t, why, func(...) {...})"
	if fn.Body == nil || len(fn.Body.List) != 1 {
		return "", "", "the body must be exactly one statement: " + want
	}
	es, ok := fn.Body.List[0].(*ast.ExprStmt)
	var call *ast.CallExpr
	if ok {
		call, ok = es.X.(*ast.CallExpr)
	}
	var id *ast.Ident
	if ok {
		id, ok = call.Fun.(*ast.Ident)
	}
	if !ok || (id.Name != "each" && id.Name != "chromiumOnly") {
		return "", "", "the body's statement must be " + want
	}
	args := map[string]int{"each": 2, "chromiumOnly": 3}[id.Name]
	if len(call.Args) != args {
		return "", "", id.Name + " takes " + map[string]string{"each": "(t, body)", "chromiumOnly": "(t, why, body)"}[id.Name]
	}
	if p := usesKind(call.Args[args-1]); p != "" {
		return "", "", id.Name + "'s body " + p
	}
	if id.Name == "each" {
		return "each", "", ""
	}
	lit, ok := call.Args[1].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", "", "chromiumOnly's why must be a string literal"
	}
	why, err := strconv.Unquote(lit.Value)
	if err != nil || strings.TrimSpace(why) == "" {
		return "", "", "chromiumOnly's why must be a non-empty string"
	}
	return "chromiumOnly", why, ""
}

// usesKind reports what is wrong unless body is a function literal whose
// second parameter (the Kind) is named and used in it.
func usesKind(body ast.Expr) string {
	lit, ok := body.(*ast.FuncLit)
	if !ok {
		return "must be a function literal func(t *testing.T, k harness.Kind) {...}"
	}
	var names []*ast.Ident
	for _, f := range lit.Type.Params.List {
		names = append(names, f.Names...)
	}
	if len(names) != 2 || names[1].Name == "_" {
		return "must name its Kind parameter: func(t *testing.T, k harness.Kind)"
	}
	k := names[1]
	used := false
	ast.Inspect(lit.Body, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == k.Name && (id.Obj == nil || id.Obj == k.Obj) {
			used = true
		}
		return !used
	})
	if !used {
		return "never uses its Kind parameter " + k.Name + ": the subtest must start the browser it is named for"
	}
	return ""
}

// checkCatches makes sure the check rejects the ways a test could run
// outside its declared browsers, and accepts the two good forms.
func checkCatches(t *testing.T) {
	const head = "package e2e\nimport \"testing\"\n"
	for src, bad := range map[string]bool{
		`func TestA(t *testing.T) { each(t, func(t *testing.T, k harness.Kind) { setup(t, k) }) }`:                false,
		`func TestA(t *testing.T) { chromiumOnly(t, "freezing", func(t *testing.T, k harness.Kind) { use(k) }) }`: false,
		`func TestA(*testing.T) { start() }`: true,
		`func TestA(t *testing.T) { x := 1; each(t, func(t *testing.T, k harness.Kind) { use(k, x) }) }`:  true,
		`func TestA(t *testing.T) { each(t, func(t *testing.T, k harness.Kind) { use(k) }); start() }`:    true,
		`func TestA(t *testing.T) { each(t, func(t *testing.T, _ harness.Kind) { start() }) }`:            true,
		`func TestA(t *testing.T) { each(t, func(*testing.T, harness.Kind) { start() }) }`:                true,
		`func TestA(t *testing.T) { each(t, func(t *testing.T, k harness.Kind) { start() }) }`:            true,
		`func TestA(t *testing.T) { each(t, body) }`:                                                      true,
		`func TestA(t *testing.T) { chromiumOnly(t, "", func(t *testing.T, k harness.Kind) { use(k) }) }`: true,
	} {
		af, err := parser.ParseFile(token.NewFileSet(), "x_test.go", head+src, 0)
		require.NoError(t, err, src)
		fn := af.Decls[1].(*ast.FuncDecl)
		require.True(t, isTestFunc(fn), src)
		_, _, problem := declaration(fn)
		require.Equal(t, bad, problem != "", "%s: %q", src, problem)
	}
}

// docTable reads the rows "| TestX | why |" of docs/browsers.md.
func docTable(doc string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 2 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if strings.HasPrefix(name, "Test") && name != "Test" {
			out[name] = strings.TrimSpace(cells[1])
		}
	}
	return out
}
