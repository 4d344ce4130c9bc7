//go:build js && wasm

package idb

import (
	"context"
	_ "embed"
	"encoding/binary"
	"math"
	"sync"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
)

// LoaderJS is the source of fast.js, the fencing store's hooks in the
// loader (`make build` ships it as dist/tabfence-idb.js), for the browser
// tests that run it as a module.
//
//go:embed fast.js
var LoaderJS string

// loaderLayout is the layout of fast.js's hooks this package speaks (its
// layout export): a bump here and there together, when either changes what
// the other passes or expects.
const loaderLayout = 1

// Applies whose transaction the loader's apply hook opened, by the id it
// hands to the export tabfence_idb_fence: from readFence until their
// verdict.
var hooked struct {
	mu   sync.Mutex
	next int32
	m    map[int32]*fenceRead
}

func hook(r *fenceRead) int32 {
	hooked.mu.Lock()
	defer hooked.mu.Unlock()
	if hooked.m == nil {
		hooked.m = make(map[int32]*fenceRead)
	}
	hooked.next++
	if hooked.next <= 0 {
		hooked.next = 1
	}
	hooked.m[hooked.next] = r
	return hooked.next
}

func unhook(id int32) {
	hooked.mu.Lock()
	delete(hooked.m, id)
	hooked.mu.Unlock()
}

// JudgeFenceExported is the export tabfence_idb_fence's body: inside the
// fence read's success event, the loader wrote the allocation record and
// the fence record of apply id into xscratch (n bytes, parseFields) and Go
// judges them as its own path does (epochFields, fenceFields, the apply's
// decide). It returns 1 when accepted, the advanced fence written into
// xscratch (putAdvanced) for the hook to store after the writes; else 0.
// Bytes it does not understand leave the apply unjudged: Go then reads the
// records itself, in the same transaction.
func JudgeFenceExported(id, n int32) int32 {
	hooked.mu.Lock()
	r := hooked.m[id]
	hooked.mu.Unlock()
	x := loader.XScratch()
	if r == nil || n <= 0 || int(n) > len(x) {
		return 0
	}
	ep, rest, ok := parseFields(x[:n])
	if !ok {
		return 0
	}
	fe, _, ok := parseFields(rest)
	if !ok {
		return 0
	}
	r.judged = true
	allocated, err := epochFields(&ep, r.epochRes)
	if err != nil {
		r.err = err
		return 0
	}
	rec, err := fenceFields(&fe, r.resource)
	if err != nil {
		r.err = err
		return 0
	}
	res, next := r.decide(rec, allocated)
	r.res = res
	if res != Accepted {
		return 0
	}
	if putAdvanced(x, next) < 0 {
		r.judged = false // Go stores it itself
		return 0
	}
	r.prepared = true
	return 1
}

// An allocation whose transaction the loader's allocate hook opened.
type allocRead struct {
	resource string
	judged   bool   // AllocExported judged the record:
	next     uint64 // the token written,
	err      error  // or why none is
}

var allocs struct {
	mu   sync.Mutex
	next int32
	m    map[int32]*allocRead
}

// AllocExported is the export tabfence_idb_alloc's body: inside the read's
// success event, the loader wrote allocation id's record into xscratch (n
// bytes, parseFields), judged here as on Go's path (epochFields,
// NextToken). It returns 1 with the token and the time to write in
// xscratch (two float64); else 0, and the hook aborts.
func AllocExported(id, n int32) int32 {
	allocs.mu.Lock()
	a := allocs.m[id]
	allocs.mu.Unlock()
	x := loader.XScratch()
	if a == nil || n <= 0 || int(n) > len(x) {
		return 0
	}
	rec, _, ok := parseFields(x[:n])
	if !ok {
		return 0
	}
	a.judged = true
	epoch, err := epochFields(&rec, a.resource)
	if err == nil {
		a.next, err = NextToken(epoch)
	}
	if err != nil {
		a.err = err
		return 0
	}
	binary.LittleEndian.PutUint64(x, math.Float64bits(float64(a.next)))
	binary.LittleEndian.PutUint64(x[8:], math.Float64bits(float64(time.Now().UnixMilli())))
	return 1
}

// allocHooked runs an allocation through the loader's allocate hook; ok
// false when it was not judged there (Go then allocates itself).
func (d *DB) allocHooked(ctx context.Context, resource, ownerID string, key js.Value) (next uint64, ok bool, err error) {
	a := &allocRead{resource: resource}
	allocs.mu.Lock()
	if allocs.m == nil {
		allocs.m = make(map[int32]*allocRead)
	}
	if allocs.next++; allocs.next <= 0 {
		allocs.next = 1
	}
	id := allocs.next
	allocs.m[id] = a
	allocs.mu.Unlock()
	defer func() {
		allocs.mu.Lock()
		delete(allocs.m, id)
		allocs.mu.Unlock()
	}()
	v := d.allocHook.Invoke(key, d.ownerJS(ownerID), id)
	if v.Type() != js.TypeObject {
		return 0, false, nil
	}
	err = raw.WrapTx(v).Await(ctx)
	switch {
	case !a.judged:
		return 0, false, nil
	case a.err != nil:
		return 0, true, a.err
	case err != nil:
		return 0, true, err
	}
	return a.next, true, nil
}

// hooksFor returns the loader's apply and allocate hooks for connection
// conn, made once by the group's applier and allocator with what every
// call would pass the same (the connection, the raw layer's handlers, the
// kick); undefined without the loader (or with one that has no such hook).
func hooksFor(conn js.Value) (apply, alloc js.Value) {
	apply, alloc = js.Undefined(), js.Undefined()
	g := loader.Group(loader.GroupIDB, loaderLayout)
	if f := g.Func("applier"); f.Type() == js.TypeFunction {
		hs, he, hc, ha := raw.Handlers()
		if v, err := jsglue.Invoke(f, conn, hs, he, hc, ha, loader.Kick()); err == nil && v.Type() == js.TypeFunction {
			apply = v
		}
	}
	if f := g.Func("allocator"); f.Type() == js.TypeFunction {
		if v, err := jsglue.Invoke(f, conn, loader.Kick()); err == nil && v.Type() == js.TypeFunction {
			alloc = v
		}
	}
	return apply, alloc
}
