package main

import (
	"go/ast"
	"go/token"
	"path"
	"strconv"
)

// exposedInternal lists the exported API of file f (a package outside
// internal/) that names a type of an internal package: a user's module
// could not name that type, so it could not use that API fully. It reads
// what is written: exported functions and methods of exported types (their
// parameters and results), exported types (their exported fields and
// methods), and the declared type of exported variables and constants.
func exposedInternal(fset *token.FileSet, f *ast.File, module string) []string {
	internal := map[string]string{} // import name -> path
	for _, im := range f.Imports {
		ip, _ := strconv.Unquote(im.Path.Value)
		r, ok := rel(module, ip)
		if !ok || !isInternal(r) {
			continue
		}
		name := path.Base(ip)
		if im.Name != nil {
			name = im.Name.Name
		}
		internal[name] = ip
	}
	if len(internal) == 0 {
		return nil
	}
	var bad []string
	report := func(what string, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && internal[id.Name] != "" {
				bad = append(bad, fset.Position(sel.Pos()).String()+": "+what+" exposes "+internal[id.Name]+"."+sel.Sel.Name)
			}
			return true
		})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && exportedRecv(d) {
				report(funcName(d), d.Type)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				specExposes(s, report)
			}
		}
	}
	return bad
}

func specExposes(s ast.Spec, report func(string, ast.Node)) {
	switch s := s.(type) {
	case *ast.TypeSpec:
		if !s.Name.IsExported() {
			return
		}
		switch t := s.Type.(type) {
		case *ast.StructType:
			for _, fld := range t.Fields.List {
				if len(fld.Names) == 0 || anyExported(fld.Names) {
					report(s.Name.Name, fld.Type)
				}
			}
		case *ast.InterfaceType:
			for _, m := range t.Methods.List {
				if len(m.Names) == 0 || anyExported(m.Names) {
					report(s.Name.Name, m.Type)
				}
			}
		default:
			report(s.Name.Name, s.Type)
		}
	case *ast.ValueSpec:
		if !anyExported(s.Names) {
			return
		}
		if s.Type != nil {
			report(s.Names[0].Name, s.Type)
		}
		for _, v := range s.Values {
			if cl, ok := v.(*ast.CompositeLit); ok && cl.Type != nil {
				report(s.Names[0].Name, cl.Type)
			}
		}
	}
}

// exportedRecv: a function, or a method of an exported type.
func exportedRecv(fd *ast.FuncDecl) bool {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return true
	}
	typ := fd.Recv.List[0].Type
	for {
		switch t := typ.(type) {
		case *ast.StarExpr:
			typ = t.X
			continue
		case *ast.IndexExpr:
			typ = t.X
			continue
		case *ast.IndexListExpr:
			typ = t.X
			continue
		case *ast.Ident:
			return t.IsExported()
		}
		return false
	}
}

func anyExported(names []*ast.Ident) bool {
	for _, n := range names {
		if n.IsExported() {
			return true
		}
	}
	return false
}
