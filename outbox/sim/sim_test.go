// Run: go test ./outbox/sim (2000 seeds; 200 in wasm or -short),
// -sim.seeds=N for more, -sim.first=F to start elsewhere, and
// -sim.seed=S -v to replay one seed with its full trace. The default run
// also fails if it met none of some batch fault (exercised).

package sim

import (
	"flag"
	"runtime"
	"strings"
	"testing"
	"time"
)

var (
	flagSeeds = flag.Int("sim.seeds", 0, "number of seeds to run (default 2000 native, 200 in wasm)")
	flagSeed  = flag.Uint64("sim.seed", 0, "replay one seed with its full trace")
	flagFirst = flag.Uint64("sim.first", 1, "first seed of the range")
	flagBytes = flag.Bool("sim.nonutf8", true, "give some payloads bytes that are not UTF-8 (false: UTF-8 only)")
)

func replayCmd(seed uint64) string {
	return "go test ./outbox/sim -run 'TestSimulation$' -sim.seed=" + itoa(seed) + " -v"
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func report(t *testing.T, w *World, fails []string) {
	t.Helper()
	t.Errorf("seed %d failed: %s\n  replay: %s\n  trace tail:\n    %s", w.Seed, strings.Join(fails, "\n  "),
		replayCmd(w.Seed), strings.Join(tail(w.trace, 40), "\n    "))
}

func tail(xs []string, n int) []string {
	if len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}

// TestSimulation runs many seeds; -sim.seed=S replays one with its trace.
func TestSimulation(t *testing.T) {
	if *flagSeed != 0 {
		w := NewWorld(*flagSeed, Options{Trace: true, UTF8Only: !*flagBytes})
		fails := w.Run()
		for _, l := range w.trace {
			t.Log(l)
		}
		t.Logf("stats %+v", w.stats)
		if len(fails) > 0 {
			report(t, w, fails)
		}
		return
	}
	n := *flagSeeds
	if n == 0 {
		n = 2000
		if runtime.GOOS == "js" || testing.Short() {
			n = 200
		}
	}
	start := time.Now()
	var total Stats
	failures := 0
	for s := *flagFirst; s < *flagFirst+uint64(n); s++ {
		w := NewWorld(s, Options{UTF8Only: !*flagBytes})
		if fails := w.Run(); len(fails) > 0 {
			report(t, w, fails)
			if failures++; failures >= 3 {
				t.Fatalf("stopping after 3 failing seeds")
			}
		}
		total.add(w.stats)
	}
	t.Logf("%d seeds in %v: %+v", n, time.Since(start).Round(time.Millisecond), total)
	if n >= 2000 {
		exercised(t, total)
	}
}

func (s *Stats) add(o Stats) {
	s.Steps += o.Steps
	s.Enqueued += o.Enqueued
	s.Coalesced += o.Coalesced
	s.Flushes += o.Flushes
	s.Crashes += o.Crashes
	s.Freezes += o.Freezes
	s.Steals += o.Steals
	s.Effects += o.Effects
	s.Requests += o.Requests
	s.Acked += o.Acked
	s.Discarded += o.Discarded
	s.Purged += o.Purged
	s.StaleRejected += o.StaleRejected
	s.Offline += o.Offline
	s.Batches += o.Batches
	s.BatchedMutations += o.BatchedMutations
	s.BatchesAnswered += o.BatchesAnswered
	s.ServerCrashes += o.ServerCrashes
	s.ClientBatchCrashes += o.ClientBatchCrashes
	s.BatchTabs += o.BatchTabs
	s.Crossed += o.Crossed
	s.SameEntity += o.SameEntity
	s.BatchLost += o.BatchLost
	s.BatchDup += o.BatchDup
	s.BatchPartial += o.BatchPartial
	s.BatchFailed += o.BatchFailed
	s.BatchStale += o.BatchStale
	s.BatchTooLarge += o.BatchTooLarge
	s.BatchNoRoute += o.BatchNoRoute
	s.BatchGarbled += o.BatchGarbled
	s.RefundsChecked += o.RefundsChecked
}

// TestDeterministic: a seed replays exactly.
func TestDeterministic(t *testing.T) {
	for _, s := range []uint64{3, 77, 1234} {
		a, b := NewWorld(s, Options{Trace: true}), NewWorld(s, Options{Trace: true})
		a.Run()
		b.Run()
		if strings.Join(a.trace, "\n") != strings.Join(b.trace, "\n") || a.stats != b.stats {
			t.Fatalf("seed %d is not deterministic", s)
		}
	}
}

// TestCheckerCatchesDuplicates: without server idempotency, duplicates and
// resends after crashes must be reported as double effects.
func TestCheckerCatchesDuplicates(t *testing.T) {
	caught := 0
	for s := uint64(1); s <= 50; s++ {
		if fails := NewWorld(s, Options{BreakIdempotency: true}).Run(); len(fails) > 0 {
			caught++
		}
	}
	if caught < 10 {
		t.Fatalf("the checker caught only %d of 50 broken runs", caught)
	}
}

// TestCheckerCatchesCrossUserWrites: the outbox alone cannot stop a tab that
// missed another tab's switch of user from sending a few of the old user's
// records with the new user's cookie before its next claim; without the
// receiver's session check the checker must report them.
func TestCheckerCatchesCrossUserWrites(t *testing.T) {
	caught := 0
	for s := uint64(1); s <= 400; s++ {
		for _, f := range NewWorld(s, Options{BreakSessionCheck: true}).Run() {
			if strings.Contains(f, "session boundary") {
				caught++
				break
			}
		}
	}
	if caught == 0 {
		t.Fatal("the checker caught no cross-user write in 400 runs without the session check")
	}
	t.Logf("caught in %d of 400 runs", caught)
}

// exercised fails t when a run of many seeds did not send batches or hit
// each batch fault: its green would say nothing about batches.
func exercised(t *testing.T, total Stats) {
	t.Helper()
	for name, n := range map[string]int{"batching tabs": total.BatchTabs, "batches": total.Batches,
		"batches answered": total.BatchesAnswered, "server crashes mid-batch": total.ServerCrashes,
		"client crashes between charge and send": total.ClientBatchCrashes,
		"keys sent alone and in a batch":         total.Crossed, "mutations after one of their entity": total.SameEntity,
		"batch answers lost": total.BatchLost, "batches sent twice": total.BatchDup,
		"partial results": total.BatchPartial, "5xx mutations": total.BatchFailed,
		"stale batches": total.BatchStale, "batches too large": total.BatchTooLarge,
		"batches to an old server": total.BatchNoRoute, "answers cut short": total.BatchGarbled,
		"resends after refunds": total.RefundsChecked} {
		if n == 0 {
			t.Errorf("no %s in the run", name)
		}
	}
	if total.BatchedMutations < 2*total.Batches {
		t.Errorf("%d mutations in %d batches: batches of about one say nothing", total.BatchedMutations, total.Batches)
	}
}

// TestCheckerCatchesBatchOrder: a server whose batches go on with an
// entity's later mutations after one failed applies them out of order;
// the checker must report it.
func TestCheckerCatchesBatchOrder(t *testing.T) {
	caught := 0
	for s := uint64(1); s <= 200; s++ {
		for _, f := range NewWorld(s, Options{BreakEntityStop: true}).Run() {
			if strings.Contains(f, "entity order") {
				caught++
				break
			}
		}
	}
	if caught == 0 {
		t.Fatal("the checker caught no out-of-order effect in 200 runs without the batch's entity stop")
	}
	t.Logf("caught in %d of 200 runs", caught)
}
