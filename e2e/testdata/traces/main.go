//go:build js && wasm

// Command traces is the program of e2e's TestStrippedModuleRuns: it makes
// the runtime use what wasmpack -strip-lines keeps (stack growth through
// the pcsp tables, garbage collection through the stack maps, goroutines,
// a recovered panic) and reports what it computed and what its stack
// traces say, in globalThis.__traces (JSON).
package main

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall/js"
)

type node struct {
	next *node
	v    int
}

// deep recurses n frames with a live pointer in each, collecting garbage
// on the way down, and sums the list on the way up.
//
//go:noinline
func deep(n int, l *node) int {
	if n == 0 {
		runtime.GC()
		s := 0
		for ; l != nil; l = l.next {
			s += l.v
		}
		return s
	}
	if n%1000 == 0 {
		runtime.GC()
	}
	_ = make([]byte, 64) // garbage
	return deep(n-1, &node{l, n})
}

//go:noinline
func inner() (frames []string, stack string) {
	pcs := make([]uintptr, 8)
	fs := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := fs.Next()
		frames = append(frames, f.Function+" "+f.File+":"+strconv.Itoa(f.Line))
		if !more {
			break
		}
	}
	func() {
		defer func() {
			if recover() != nil {
				stack = string(debug.Stack())
			}
		}()
		var m map[string]int
		m["x"]++ // a nil map: panics
	}()
	return frames, stack
}

func main() {
	sums := make(chan int)
	for g := 0; g < 4; g++ {
		go func() { sums <- deep(5000, nil) }()
	}
	total := 0
	for g := 0; g < 4; g++ {
		total += <-sums
	}
	frames, stack := inner()
	q := strconv.Quote
	js.Global().Set("__traces", `{"total":`+strconv.Itoa(total)+`,"numGC":`+strconv.Itoa(int(gcCount()))+
		`,"frames":[`+quoteAll(frames)+`],"stack":`+q(stack)+`}`)
}

func gcCount() uint32 {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return s.NumGC
}

func quoteAll(xs []string) string {
	qs := make([]string, len(xs))
	for i, x := range xs {
		qs[i] = strconv.Quote(x)
	}
	return strings.Join(qs, ",")
}
