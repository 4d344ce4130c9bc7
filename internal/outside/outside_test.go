package outside

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The READMEs whose ```go blocks must compile.
var readmes = []string{"README.md", "receiver/README.md"}

// TestExamplesCompileFromAnotherModule copies every Example file (outside
// internal/) and every README Go snippet into a throwaway module that
// requires this one, then vets and builds it and runs the Examples there.
func TestExamplesCompileFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not in -short")
	}
	root := moduleRoot(t)
	dir, wasmDirs := t.TempDir(), map[string]bool{}
	writeModule(t, root, dir)
	examples := copyExamples(t, root, dir, wasmDirs)
	require.GreaterOrEqual(t, examples, 5, "Example files found")
	snippets := writeSnippets(t, root, dir, wasmDirs)
	require.GreaterOrEqual(t, snippets, 3, "README Go snippets found")

	goCmd(t, dir, nil, "vet", "./...")
	var wasm []string
	for d := range wasmDirs {
		wasm = append(wasm, "./"+d)
	}
	sort.Strings(wasm)
	goCmd(t, dir, []string{"GOOS=js", "GOARCH=wasm"}, append([]string{"vet"}, wasm...)...)
	goCmd(t, dir, nil, "build", "./...")
	out := goCmd(t, dir, nil, "test", "-count=1", "-run", "^Example", "./...")
	require.NotContains(t, out, "no tests to run")
}

// TestOutsideModuleRefusesInternalImports: the harness above catches an
// Example that imports an internal package, because the go command refuses
// it in another module.
func TestOutsideModuleRefusesInternalImports(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: not in -short")
	}
	root := moduleRoot(t)
	dir := t.TempDir()
	writeModule(t, root, dir)
	mod := modulePath(t, root)
	writeFile(t, filepath.Join(dir, "ex", "leak", "doc.go"), "package leak\n")
	writeFile(t, filepath.Join(dir, "ex", "leak", "example_test.go"), "package leak_test\n\nimport \"fmt\"\nimport \""+mod+"/internal/digest\"\n\nfunc Example() {\n\tfmt.Println(len(digest.SHA256(nil)))\n\t// Output: 32\n}\n")
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir, cmd.Env = dir, goEnv(nil)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	require.Contains(t, string(out), "use of internal package")
}

func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

func modulePath(t *testing.T, root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(b)
	require.NotNil(t, m, "module line in go.mod")
	return string(m[1])
}

// writeModule starts a module in dir that requires the one at root through
// a replace, with root's go.sum (the go command fills in the rest from the
// module cache: -mod=mod).
func writeModule(t *testing.T, root, dir string) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(b)
	require.NotNil(t, goLine, "go line in go.mod")
	mod := modulePath(t, root)
	writeFile(t, filepath.Join(dir, "go.mod"), "module example.com/outside\n\n"+string(goLine)+"\n\nrequire "+mod+" v0.0.0\n\nreplace "+mod+" => "+root+"\n")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))
}

// copyExamples copies each test file with an Example (outside internal/,
// testdata and dot directories) to ex/<its directory> in dir, beside a file
// declaring the package the Examples are named after, and returns how many
// it copied. Files built only for js/wasm mark their directory in wasmDirs.
func copyExamples(t *testing.T, root, dir string, wasmDirs map[string]bool) int {
	n := 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "internal" || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(src, []byte("\nfunc Example")) {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, src, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		pkg, external := strings.CutSuffix(f.Name.Name, "_test")
		require.True(t, external, "%s: Examples belong in package %s_test, which sees only what a user sees", rel, f.Name.Name)
		to := filepath.Join(dir, "ex", rel)
		writeFile(t, to, string(src))
		writeFile(t, filepath.Join(filepath.Dir(to), "doc.go"), "package "+pkg+"\n")
		if jsOnly(src) {
			wasmDirs[filepath.ToSlash(filepath.Dir(filepath.Join("ex", rel)))] = true
		}
		n++
		return nil
	})
	require.NoError(t, err)
	return n
}

func jsOnly(src []byte) bool {
	return regexp.MustCompile(`(?m)^//go:build .*\bjs\b`).Match(src)
}

// The names a README snippet takes from the reader's own program, and how
// the program that wraps it declares them.
var given = map[string]string{
	"ctx":             "ctx := context.Background()",
	"schema":          "var schema idb.Schema",
	"note":            "note := js.ValueOf(\"a note\")",
	"mux":             "mux := http.NewServeMux()",
	"userFromSession": "userFromSession := func(*http.Request) (string, error) { return \"user-1\", nil }",
	"createNote":      "var createNote receiver.Handler",
	"rc":              "var rc *receiver.Receiver",
	"store":           "var store receiver.Store",
	"body":            "body := []byte(`{\"id\":\"i1\",\"title\":\"Ship it\"}`)",
}

// The packages a snippet may name, by the name it uses.
var known = map[string]string{
	"context": "context", "http": "net/http", "js": "syscall/js",
	"idb": "/idb", "locks": "/locks", "channel": "/channel", "outbox": "/outbox", "wire": "/wire",
	"receiver": "/receiver", "sqlitestore": "/receiver/sqlitestore", "pgstore": "/receiver/pgstore",
	"realtime": "/receiver/realtime", "browser": "/realtime/browser",
}

// browser are the packages that make a snippet a js/wasm program.
var browser = map[string]bool{"js": true, "idb": true, "locks": true, "channel": true, "browser": true}

// writeSnippets makes each ```go block of the READMEs a program in
// readme/<n>: main declares the names in given that the snippet uses, runs
// the snippet, and marks what the snippet declares as used (a snippet shows
// a step, not a whole program). It returns how many it wrote.
func writeSnippets(t *testing.T, root, dir string, wasmDirs map[string]bool) int {
	mod := modulePath(t, root)
	n := 0
	for _, readme := range readmes {
		b, err := os.ReadFile(filepath.Join(root, readme))
		require.NoError(t, err)
		for i, m := range regexp.MustCompile("(?ms)^```go\n(.*?)^```").FindAllSubmatch(b, -1) {
			where := readme + " Go block " + strconv.Itoa(i+1)
			src, isWasm := program(t, where, string(m[1]), mod)
			sub := filepath.ToSlash(filepath.Join("readme", strconv.Itoa(n)))
			writeFile(t, filepath.Join(dir, sub, "main.go"), "// "+where+"\n\n"+src)
			if isWasm {
				wasmDirs[sub] = true
			}
			n++
		}
	}
	return n
}

// program wraps snippet in a main package (see writeSnippets).
func program(t *testing.T, where, snippet, mod string) (src string, isWasm bool) {
	body := parseBody(t, where, snippet)
	idents, selectors := names(body)
	var pre, post []string
	for _, name := range sortedKeys(given) {
		if idents[name] && !defines(body, name) {
			pre = append(pre, given[name], "_ = "+name)
		}
	}
	for _, name := range defined(body) {
		post = append(post, "_ = "+name)
	}
	wrapped := strings.Join(pre, "\n") + "\n" + snippet + "\n" + strings.Join(post, "\n")
	_, selectors = names(parseBody(t, where, wrapped))
	var imports []string
	for _, name := range sortedKeys(selectors) {
		path, ok := known[name]
		if !ok {
			continue // a value's field or method, not a package
		}
		if strings.HasPrefix(path, "/") {
			path = mod + path
		}
		imports = append(imports, strconv.Quote(path))
		isWasm = isWasm || browser[name]
	}
	tag := ""
	if isWasm {
		tag = "//go:build js && wasm\n\n"
	}
	return tag + "package main\n\nimport (\n" + strings.Join(imports, "\n") + "\n)\n\nfunc main() {\n" + wrapped + "\n}\n", isWasm
}

func parseBody(t *testing.T, where, body string) *ast.BlockStmt {
	f, err := parser.ParseFile(token.NewFileSet(), where, "package main\nfunc main() {\n"+body+"\n}\n", 0)
	require.NoError(t, err, "%s does not parse as statements", where)
	return f.Decls[0].(*ast.FuncDecl).Body
}

// names are the identifiers body uses, and those it uses before a dot.
func names(body *ast.BlockStmt) (idents, selectors map[string]bool) {
	idents, selectors = map[string]bool{}, map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			idents[n.Name] = true
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				selectors[id.Name] = true
			}
		}
		return true
	})
	return idents, selectors
}

// defined are the names body's own statements declare with :=.
func defined(body *ast.BlockStmt) []string {
	seen := map[string]bool{}
	var out []string
	for _, st := range body.List {
		if as, ok := st.(*ast.AssignStmt); ok && as.Tok == token.DEFINE {
			for _, l := range as.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" && !seen[id.Name] {
					seen[id.Name] = true
					out = append(out, id.Name)
				}
			}
		}
	}
	return out
}

func defines(body *ast.BlockStmt, name string) bool {
	for _, d := range defined(body) {
		if d == name {
			return true
		}
	}
	return false
}

// goCmd runs the go command in dir and fails the test with its output on
// an error.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, goEnv(env)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// goEnv is this process's environment for the go command in the throwaway
// module: its go.mod may be completed from the module cache (-mod=mod);
// the proxy and cache settings stay as they are.
func goEnv(extra []string) []string {
	flags, _ := exec.Command("go", "env", "GOFLAGS").Output() // the environment's or go env -w's
	env := append(os.Environ(), "GOFLAGS="+strings.TrimSpace(strings.TrimSpace(string(flags))+" -mod=mod"), "GOWORK=off")
	return append(env, extra...)
}

func writeFile(t *testing.T, p, body string) {
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
