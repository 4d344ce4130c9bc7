//go:build js && wasm

package main

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/internal/benchjs"
	"github.com/tabfence/tabfence/jsglue"
)

// The bench's comparison of the idb package with the same IndexedDB
// transactions written in raw JavaScript, run in the same page on the same
// connection (DB.JS). Go and JavaScript alternate in rounds (and swap who
// goes first) so that drift — a warming disk cache, a growing database, load
// on the machine — falls on both alike.

// benchRounds is how many alternating rounds a bench is split into, after
// benchWarmup untimed transactions per side.
const (
	benchRounds = 60
	benchWarmup = 150
)

// benchResult is one comparison: both rates over all rounds, and Go's rate
// over JavaScript's in each round. A burst of work elsewhere on the machine
// (a LevelDB compaction, another process) lands on whichever side is
// running; the median of the per-round ratios is robust to a few such
// rounds, where the pooled rates are not.
type benchResult struct {
	GoPerSec, JSPerSec float64
	Ratios             []float64
}

// benchAllocate runs n token allocations through idb.DB.AllocateToken and n
// through raw JavaScript doing the same readwrite transaction (benchjs's
// idb.js: get the epoch record, put it incremented, browser's default
// durability), and returns both rates in transactions per second.
func benchAllocate(ctx context.Context, n int) (benchResult, error) {
	return bench(ctx, n, "allocate", func(d *idb.DB, i int) error {
		_, err := d.AllocateToken(ctx, "bench-go", "bench")
		return err
	})
}

// benchApply is benchAllocate for idb.DB.Apply: per operation one readwrite
// transaction over tf_epochs, tf_fences and an app store that reads the
// allocation record and the fence, decides (the epochs, the duplicate check
// over the remembered IDs), puts one app record and the advanced fence.
func benchApply(ctx context.Context, n int) (benchResult, error) {
	return bench(ctx, n, "apply", func(d *idb.DB, i int) error {
		op := idb.Op{Resource: "bench-go", Token: 1, OperationID: "op" + strconv.Itoa(i)}
		res, err := d.Apply(ctx, op, func(tx *idb.WriteTx) error {
			return tx.Put(benchjs.IDBStore, js.ValueOf("k"+strconv.Itoa(i)), js.ValueOf(i))
		}, benchjs.IDBStore)
		if err == nil && res != idb.Accepted {
			err = errors.New("idbbench: apply was " + res.String())
		}
		return err
	})
}

// benchTrace, when set (tests), hears the cumulative times after each round.
var benchTrace func(round int, goTime, jsTime time.Duration)

// bench opens a fresh database with the bench's store, warms both sides
// up and times them in alternating rounds; the raw JavaScript side runs
// idb.js's loop over kind.
func bench(ctx context.Context, n int, kind string, goOne func(d *idb.DB, i int) error) (res benchResult, err error) {
	if n <= 0 {
		return res, errors.New("idbbench: needs n > 0")
	}
	name := "tabfence-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	d, err := idb.Open(ctx, name, idb.WithSchema(idb.Schema{Steps: []idb.Step{{Version: 1, Upgrade: func(tx *idb.UpgradeTx) error {
		return tx.CreateStore(benchjs.IDBStore, idb.StoreOptions{})
	}}}}))
	if err != nil {
		return res, err
	}
	defer func() {
		d.Close()
		_ = idb.Delete(context.Background(), name, nil)
	}()
	// Built with Function: fine for a bench harness (a page with a strict
	// CSP would refuse it, and the bench says so).
	raw, err := benchjs.IDB()
	if err != nil {
		return res, err
	}
	s := &sides{goOne: func(i int) error { return goOne(d, i) }, js: func(from, k int) (js.Value, error) {
		return jsglue.Await(ctx, raw.Call("loop", d.JS(), kind, "bench-js", from, k))
	}}
	if err := s.warmUp(n); err != nil {
		return res, err
	}
	return s.alternate(n)
}

// sides are the two implementations under comparison and the time each has
// spent so far.
type sides struct {
	goOne          func(i int) error                   // the i-th operation in Go
	js             func(from, k int) (js.Value, error) // k operations in JavaScript, resolving to their ms
	goTime, jsTime time.Duration
}

// warmUp runs both sides untimed. V8 compiles wasm lazily and optimizes hot
// functions in the background: Go's first ~100 transactions in a page run
// at 2-3x their steady cost (the JavaScript loop warms up much faster). The
// figures are steady-state rates.
func (s *sides) warmUp(n int) error {
	warm := min(n, benchWarmup)
	for i := 0; i < warm; i++ {
		if err := s.goOne(-1 - i); err != nil {
			return err
		}
	}
	_, err := s.js(-warm, warm)
	return err
}

func (s *sides) runGo(from, k int) error {
	start := time.Now()
	for i := from; i < from+k; i++ {
		if err := s.goOne(i); err != nil {
			return err
		}
	}
	s.goTime += time.Since(start)
	return nil
}

func (s *sides) runJS(from, k int) error {
	ms, err := s.js(from, k)
	if err != nil {
		return err
	}
	s.jsTime += time.Duration(ms.Float() * float64(time.Millisecond))
	return nil
}

// alternate splits n operations per side into rounds, each side going first
// in every other round.
func (s *sides) alternate(n int) (res benchResult, err error) {
	rounds := min(benchRounds, n)
	for r := 0; r < rounds; r++ {
		from, k := r*(n/rounds), n/rounds
		if r == rounds-1 {
			k = n - from
		}
		goBefore, jsBefore := s.goTime, s.jsTime
		first, second := s.runGo, s.runJS
		if r%2 == 1 {
			first, second = s.runJS, s.runGo
		}
		if err := first(from, k); err != nil {
			return res, err
		}
		if err := second(from, k); err != nil {
			return res, err
		}
		if benchTrace != nil {
			benchTrace(r, s.goTime, s.jsTime)
		}
		// Equal counts per side: the ratio of rates is JS's time over Go's.
		res.Ratios = append(res.Ratios, (s.jsTime-jsBefore).Seconds()/(s.goTime-goBefore).Seconds())
	}
	res.GoPerSec, res.JSPerSec = float64(n)/s.goTime.Seconds(), float64(n)/s.jsTime.Seconds()
	return res, nil
}
