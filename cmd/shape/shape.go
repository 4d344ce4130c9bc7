package main

import (
	"errors"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tree is what one walk of the module finds.
type tree struct {
	module  string
	pkgs    map[string]int             // package dir -> non-test lines
	files   map[string]int             // non-test file -> lines
	funcs   []fn                       // every function of a non-test file
	imports map[string]map[string]bool // package -> module packages its non-test files import (any build tags)
	tests   map[string]map[string]bool // the same for its test files
	native  map[string][]string        // package -> imports of a native build
	exposed []string                   // exported API naming an internal package's type
}

// fn is one function or method declaration.
type fn struct {
	where       string // file:name
	lines, code int    // code: lines outside data tables
}

// scan walks the module rooted at root. Generated files, testdata, dist,
// node_modules and dot directories are left out.
func scan(root string) (*tree, error) {
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	t := &tree{module: module, pkgs: map[string]int{}, files: map[string]int{}, imports: map[string]map[string]bool{}, tests: map[string]map[string]bool{}, native: map[string][]string{}}
	dirs := map[string]bool{}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		relPath, _ := filepath.Rel(root, p)
		relPath = filepath.ToSlash(relPath)
		dirs[filepath.Dir(p)] = true
		return t.addFile(relPath, p)
	})
	if err != nil {
		return nil, err
	}
	for dir := range dirs {
		if err := t.addNative(root, dir); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *tree) addFile(relPath, p string) error {
	src, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, relPath, src, parser.ParseComments)
	if err != nil {
		return err
	}
	pkg := filepath.ToSlash(filepath.Dir(relPath))
	test := strings.HasSuffix(p, "_test.go")
	graph := t.imports
	if test {
		graph = t.tests
	}
	deps := graph[pkg]
	if deps == nil {
		deps = map[string]bool{}
		graph[pkg] = deps
	}
	for _, im := range f.Imports {
		ip, _ := strconv.Unquote(im.Path.Value)
		if r, ok := rel(t.module, ip); ok && r != pkg {
			deps[r] = true
		}
	}
	if test || ast.IsGenerated(f) {
		return nil
	}
	n := strings.Count(string(src), "\n")
	t.pkgs[pkg] += n
	t.files[relPath] = n
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			t.funcs = append(t.funcs, fn{where: relPath + ":" + funcName(fd), lines: lines, code: lines - dataLines(fset, fd.Body)})
		}
	}
	if !isInternal(pkg) && f.Name.Name != "main" {
		t.exposed = append(t.exposed, exposedInternal(fset, f, t.module)...)
	}
	return nil
}

// addNative records what dir's package imports when built for this machine.
func (t *tree) addNative(root, dir string) error {
	bp, err := build.Default.ImportDir(dir, 0)
	var none *build.NoGoError
	if errors.As(err, &none) {
		return nil
	}
	if err != nil {
		return err
	}
	relDir, _ := filepath.Rel(root, dir)
	pkg := filepath.ToSlash(relDir)
	var deps []string
	for _, ip := range bp.Imports {
		if r, ok := rel(t.module, ip); ok {
			ip = r
		}
		deps = append(deps, ip)
	}
	t.native[pkg] = deps
	return nil
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch g := typ.(type) {
	case *ast.IndexExpr:
		typ = g.X
	case *ast.IndexListExpr:
		typ = g.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// dataLines counts the lines of body inside data tables: composite
// literals (a slice, map or struct of rows) of at least two elements whose
// elements are all data — literals, names, other data tables, key: value
// pairs of data — not code. The braces' own lines count as code.
func dataLines(fset *token.FileSet, body *ast.BlockStmt) int {
	n := 0
	ast.Inspect(body, func(node ast.Node) bool {
		cl, ok := node.(*ast.CompositeLit)
		if !ok || len(cl.Elts) < 2 || !isData(cl) {
			return true
		}
		if inner := fset.Position(cl.Rbrace).Line - fset.Position(cl.Lbrace).Line - 1; inner > 0 {
			n += inner
		}
		return false // an outer table counts its inner ones
	})
	return n
}

func isData(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit, *ast.Ident:
		return true
	case *ast.SelectorExpr:
		_, ok := e.X.(*ast.Ident)
		return ok
	case *ast.UnaryExpr:
		return isData(e.X)
	case *ast.BinaryExpr:
		return isData(e.X) && isData(e.Y)
	case *ast.ParenExpr:
		return isData(e.X)
	case *ast.KeyValueExpr:
		return isData(e.Key) && isData(e.Value)
	case *ast.CompositeLit:
		for _, el := range e.Elts {
			if !isData(el) {
				return false
			}
		}
		return true
	}
	return false
}

func isInternal(pkg string) bool {
	return pkg == "internal" || strings.HasPrefix(pkg, "internal/") || strings.Contains(pkg, "/internal/") || strings.HasSuffix(pkg, "/internal")
}

// modulePath reads the module line of root's go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1], nil
		}
	}
	return "", errors.New("shape: no module line in go.mod")
}
