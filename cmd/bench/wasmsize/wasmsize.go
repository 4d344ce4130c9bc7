// Package wasmsize attributes a Go wasm binary's code to Go packages, so a
// change that grows the download can be traced to the package that grew.
//
// It reads two sections of a binary built WITHOUT -s: the code section
// (one body per defined function) and the "name" custom section (function
// names, e.g. "github.com/tabfence/tabfence/idb.(*Tx).Await"), and sums body
// sizes by package path. Sizes are uncompressed bytes of code; data
// segments (strings, tables) are reported as one line.
package wasmsize

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/tabfence/tabfence/internal/wasmpack"

	"github.com/tabfence/tabfence/cmd/bench/figures"
)

// Package is one row of the report.
type Package struct {
	Path  string
	Bytes int
	Funcs int
}

// Func is one function body: its name-section symbol and code bytes.
type Func struct {
	Name  string
	Bytes int
}

// Report is the attribution of one binary.
type Report struct {
	Total    int // file size
	Code     int // sum of function bodies
	Data     int // data section
	Packages []Package
	// Funcs is every function body, largest first: the per-package totals
	// say where code lives, this says which function to look at (a single
	// std function such as time.Time.Format can cost kilobytes).
	Funcs []Func
}

// Analyze reads the wasm file at path.
func Analyze(path string) (Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Report{}, err
	}
	return analyze(b)
}

// analyze reads the module's sections, then attributes each function body
// to its package by the name section's names.
func analyze(b []byte) (Report, error) {
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("\x00asm")) {
		return Report{}, errors.New("wasmsize: not a wasm module")
	}
	rep := Report{Total: len(b)}
	m := module{names: map[int]string{}}
	r := &wasmpack.Reader{B: b, I: 8}
	for r.I < len(b) {
		id := r.Byte()
		size := int(r.ULEB())
		start := r.I
		end := start + size
		if end > len(b) || r.Err != nil {
			return rep, errors.New("wasmsize: truncated section")
		}
		sec := &wasmpack.Reader{B: b[:end], I: start}
		switch id {
		case 2: // imports: functions among them shift the index space
			m.imports(sec)
		case 10: // code
			m.code(sec)
		case 11:
			rep.Data = size
		case 0:
			if sec.Name() == "name" {
				m.funcNames(sec, end)
			}
		}
		if sec.Err != nil {
			return rep, sec.Err
		}
		r.I = end
	}
	if len(m.names) == 0 {
		return rep, errors.New("wasmsize: no name section (build without -s -w)")
	}
	m.attribute(&rep)
	return rep, nil
}

// module is what analyze gathers from the sections.
type module struct {
	imported int            // imported functions: the code's indexes start after them
	bodies   []int          // the size of each function body, in order
	names    map[int]string // function index -> name
}

func (m *module) imports(sec *wasmpack.Reader) {
	n := int(sec.ULEB())
	for k := 0; k < n && sec.Err == nil; k++ {
		sec.Name()
		sec.Name()
		switch sec.Byte() {
		case 0:
			sec.ULEB()
			m.imported++
		case 1:
			sec.Byte()
			sec.Limits()
		case 2:
			sec.Limits()
		case 3:
			sec.Byte()
			sec.Byte()
		}
	}
}

func (m *module) code(sec *wasmpack.Reader) {
	n := int(sec.ULEB())
	for k := 0; k < n && sec.Err == nil; k++ {
		sz := int(sec.ULEB())
		m.bodies = append(m.bodies, sz)
		sec.I += sz
	}
}

// funcNames reads the function names (subsection 1) of the name section,
// which ends at end.
func (m *module) funcNames(sec *wasmpack.Reader, end int) {
	for sec.I < end && sec.Err == nil {
		sub := sec.Byte()
		ssz := int(sec.ULEB())
		next := sec.I + ssz
		if sub == 1 {
			n := int(sec.ULEB())
			for k := 0; k < n && sec.Err == nil; k++ {
				idx := int(sec.ULEB())
				m.names[idx] = sec.Name()
			}
		}
		sec.I = next
	}
}

// attribute fills rep's functions and packages, largest first.
func (m *module) attribute(rep *Report) {
	by := map[string]*Package{}
	for k, sz := range m.bodies {
		name := m.names[m.imported+k]
		rep.Funcs = append(rep.Funcs, Func{Name: name, Bytes: sz})
		p := pkgOf(name)
		if by[p] == nil {
			by[p] = &Package{Path: p}
		}
		by[p].Bytes += sz
		by[p].Funcs++
		rep.Code += sz
	}
	for _, p := range by {
		rep.Packages = append(rep.Packages, *p)
	}
	sort.Slice(rep.Packages, func(i, j int) bool { return rep.Packages[i].Bytes > rep.Packages[j].Bytes })
	sort.SliceStable(rep.Funcs, func(i, j int) bool { return rep.Funcs[i].Bytes > rep.Funcs[j].Bytes })
}

// pkgOf returns the package path of a function name from the wasm name
// section, where the linker writes paths with '/' replaced by '_':
// "github.com_tabfence_tabfence_idb.(*Tx).Await" -> "github.com/tabfence/tabfence/idb",
// "internal_runtime_maps.(*Map).get" -> "internal/runtime/maps",
// "runtime.gcStart" -> "runtime". (A package whose own name has '_' is
// shown with '/'; none of ours has one.)
func pkgOf(sym string) string {
	if sym == "" {
		return "(unnamed)"
	}
	from := 0
	// A module host ("github.com_", "golang.org_") has a dot before the
	// first '_': skip past it.
	if u := strings.IndexByte(sym, '_'); u > 0 && isHost(sym[:u]) {
		from = u + 1
	}
	dot := strings.IndexByte(sym[from:], '.')
	if dot < 0 {
		return sym
	}
	return strings.ReplaceAll(sym[:from+dot], "_", "/")
}

func isHost(s string) bool {
	if !strings.Contains(s, ".") || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Print writes the top n packages and a line for the rest, as a
// figures.Table (so make bench's figures.md keeps it).
func (rep Report) Print(w io.Writer, n int) {
	t := figures.NewTable(w)
	fmt.Fprintf(t, "package (uncompressed code bytes)\tbytes\tfuncs\t\n")
	rest, restF := 0, 0
	for i, p := range rep.Packages {
		if i < n {
			fmt.Fprintf(t, "%s\t%d\t%d\t\n", p.Path, p.Bytes, p.Funcs)
			continue
		}
		rest += p.Bytes
		restF += p.Funcs
	}
	fmt.Fprintf(t, "(other packages)\t%d\t%d\t\n", rest, restF)
	fmt.Fprintf(t, "data section\t%d\t\t\n", rep.Data)
	_ = t.Flush()
}

// PrintFuncs writes the n largest functions whose package path has the
// given prefix ("" for all), e.g. "time" or "github.com/tabfence/tabfence/".
func (rep Report) PrintFuncs(w io.Writer, n int, prefix string) {
	t := figures.NewTable(w)
	fmt.Fprintf(t, "largest functions (uncompressed code bytes)\tbytes\t\n")
	for _, f := range rep.Funcs {
		if n <= 0 {
			break
		}
		if !strings.HasPrefix(pkgOf(f.Name), prefix) {
			continue
		}
		fmt.Fprintf(t, "%s\t%d\t\n", f.Name, f.Bytes)
		n--
	}
	_ = t.Flush()
}
