// Package sim is a deterministic simulation of the outbox: N tabs share one
// store, contend for a simulated Web Lock (ifAvailable, steal) or the
// IndexedDB lease fallback, crash and freeze at every yield point, and flush
// over a lossy, slow, duplicating network to a receiver with idempotency and
// fencing, through 429/5xx storms, auth expiry and user switches. Some
// worlds' tabs (all, or some beside single senders) send batches to the
// receiver's batch route, which crashes mid-batch, answers a suffix retry,
// fails single mutations, refuses too large or stale batches, or does not
// speak the format (batchnet.go, batchserver.go). Everything
// is driven by one seed (math/rand/v2 PCG) and a virtual clock; tabs are
// coroutines that run one at a time, so a seed replays exactly.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
)

const resource = "outbox:sim"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Options tweak a run; the zero value is the normal simulation.
type Options struct {
	// BreakIdempotency makes the server apply every request: the invariant
	// checker must then catch duplicate effects (a test of the checker).
	BreakIdempotency bool
	// BreakSessionCheck makes the server ignore X-Client-User: a tab that
	// has not heard of another tab's switch of user then stores the old
	// user's records as the new one's, which the checker must catch.
	BreakSessionCheck bool
	// BreakEntityStop makes the server's batches go on with an entity's
	// later mutations after one failed: the checker must then report
	// effects out of entity order (a test of the checker).
	BreakEntityStop bool
	// UTF8Only keeps every payload UTF-8. Off by default: some payloads
	// are bytes that are not UTF-8 (the JS API sends a Uint8Array body as
	// is), which a batch cannot carry as they are, so they go alone.
	UTF8Only bool
	// Trace keeps every trace line (for replaying one seed), not just the tail.
	Trace bool
}

// World is one simulated browser plus server.
type World struct {
	Seed  uint64
	opt   Options
	rng   *rand.Rand
	now   time.Time
	store *memstore.Store
	srv   *Server
	tabs  []*Tab

	webLocks    bool
	holder      *Tab // Web Lock holder
	holderSince time.Time
	maxToken    uint64 // highest local lease token ever issued

	users []string
	user  string // the browser's session

	enq   map[string]*enqInfo
	ids   int
	calm  bool
	stats Stats
	// charged: records one of whose attempts stayed charged (see
	// checkAttempts); the others were refunded at every send.
	charged    map[string]bool
	sentBefore map[string]bool
	trace      []string
	failed     []string

	pDropBefore, pDropAfter, pDup, pCrash, pFreeze float64
	batch                                          batchKnobs

	// offlineUntil: the device has no network until then (the browser
	// knows it: sends fail with outbox.ErrOffline); at its end every tab
	// hears the online event once (offline false again).
	offlineUntil time.Time
	offline      bool
}

// Stats summarises a run.
type Stats struct {
	Steps, Enqueued, Coalesced, Flushes, Crashes, Freezes, Steals, Effects, Requests int
	Acked, Discarded, Purged, StaleRejected                                          int
	// Offline: sends that failed because the device was offline.
	Offline int
	// Batches: batch requests the server received (BatchedMutations their
	// mutations, BatchesAnswered those answered 200); ServerCrashes:
	// batches the server died in; ClientBatchCrashes: batches whose tab
	// died after charging them and before sending.
	Batches, BatchedMutations, BatchesAnswered, ServerCrashes, ClientBatchCrashes int
	// BatchTabs: tab (re)starts with BatchEndpoint set. Crossed: keys the
	// server got both alone and in a batch.
	BatchTabs, Crossed int
	// SameEntity: mutations that followed one of their entity in a batch.
	SameEntity int
	// Batch faults met: answers lost, batches sent twice, partial
	// results (a suffix out of time), 5xx mutations, whole batches
	// refused as stale (409), too large (413), or by an old server (404).
	BatchLost, BatchDup, BatchPartial, BatchFailed, BatchStale, BatchTooLarge, BatchNoRoute int
	// BatchGarbled: 200 answers cut short (the client must fall back).
	BatchGarbled int
	// RefundsChecked: resends of a record refunded at every earlier send,
	// checked to carry one attempt.
	RefundsChecked int
}

type enqInfo struct {
	user, entity, key, hash, op string
	seq                         uint64
	deps                        []string
	gone                        string // "discarded" or "purged": allowed to vanish
}

func (w *World) time() time.Time { return w.now }

type vclock struct{ w *World }

func (c vclock) Now() time.Time { return c.w.now }

func (w *World) chance(p float64) bool {
	if w.calm {
		return false
	}
	return w.rng.Float64() < p
}

func (w *World) tracef(format string, args ...any) {
	line := strconv.FormatInt(w.now.Sub(epoch).Milliseconds(), 10) + "ms " + fmt.Sprintf(format, args...)
	w.trace = append(w.trace, line)
	if !w.opt.Trace && len(w.trace) > 400 {
		w.trace = append(w.trace[:0], w.trace[200:]...)
	}
}

func (w *World) violation(format string, args ...any) {
	w.failed = append(w.failed, fmt.Sprintf(format, args...))
}

// NewWorld builds the world for seed: every knob comes from the seed.
func NewWorld(seed uint64, opt Options) *World {
	w := &World{Seed: seed, opt: opt, rng: rand.New(rand.NewPCG(seed, 0x7ab_fe_ce)), now: epoch,
		store: memstore.New(), srv: NewServer(), enq: map[string]*enqInfo{}, charged: map[string]bool{}, sentBefore: map[string]bool{},
		users: []string{"u1", "u2"}, user: "u1"}
	w.srv.breakIdem = opt.BreakIdempotency
	w.srv.breakSession = opt.BreakSessionCheck
	w.srv.breakEntityStop = opt.BreakEntityStop
	w.webLocks = w.rng.IntN(4) != 0
	w.pDropBefore = w.rng.Float64() * 0.2
	w.pDropAfter = w.rng.Float64() * 0.2
	w.pDup = w.rng.Float64() * 0.15
	w.pCrash = w.rng.Float64() * 0.04
	w.pFreeze = w.rng.Float64() * 0.04
	w.drawBatchKnobs()
	w.store.OnWrite = func(wr memstore.Write) {
		if wr.Token != wr.Current || wr.Token != w.maxToken {
			w.violation("stale write: %s %s by %s token %d, lease row %d, highest issued %d", wr.Op, wr.RecordID, wr.Owner, wr.Token, wr.Current, w.maxToken)
		}
	}
	n := 2 + w.rng.IntN(4)
	for i := 0; i < n; i++ {
		t := &Tab{w: w, idx: i}
		w.tabs = append(w.tabs, t)
		w.start(t)
	}
	return w
}

// endpointOf is where a record of operation op is POSTed alone.
func (w *World) endpointOf(op string) string {
	switch {
	case op == "star":
		return "/api/stars"
	case op == "tags" && w.batch.tags != "":
		return w.batch.tags
	}
	return "/api/commands"
}

func (w *World) newID() string {
	w.ids++
	return "r" + strconv.Itoa(w.ids)
}

// start (re)opens a tab: a fresh Outbox, as after a reload.
func (w *World) start(t *Tab) {
	t.gen++
	t.owner = "tab" + strconv.Itoa(t.idx) + "." + strconv.Itoa(t.gen)
	t.alive, t.killed, t.flushing, t.frozen, t.noBatch = true, false, false, false, false
	cfg := outbox.Config{
		Name: "sim", Store: tabStore{t}, Transport: tabTransport{t}, Clock: vclock{w},
		Policies: map[string]queue.Policy{
			"comment": {Dedupe: queue.Append},
			"title":   {Dedupe: queue.ReplaceLatest},
			"tags": {Dedupe: queue.Merge, Endpoint: w.endpointOf("tags"), Merge: func(a, b []byte) ([]byte, error) {
				return append(append(append([]byte{}, a...), '|'), b...), nil
			}},
			"star": {Dedupe: queue.DropIfExists, Endpoint: w.endpointOf("star")},
		},
		MaxAttempts:      3 + w.rng.IntN(5),
		Backoff:          &outbox.Backoff{Base: 100 * time.Millisecond, Cap: 4 * time.Second, Rand: rand.New(rand.NewPCG(w.Seed, uint64(t.idx*1000+t.gen)))},
		InlineLimit:      16,
		BatchSize:        1 + w.rng.IntN(6),
		ChargeAhead:      1 + w.rng.IntN(4),
		MaxFlushDuration: 3 * time.Second,
		Concurrency:      1,
		LeaseTTL:         2 * time.Second,
		NewID:            w.newID,
	}
	if w.batching() {
		w.stats.BatchTabs++
		cfg.BatchEndpoint, cfg.BatchMax = w.srv.BatchEndpoint, w.batch.max
		t.owner += "b"
		t.pageMax = w.batch.max
	}
	ob, err := outbox.New(cfg)
	if err != nil {
		panic(err)
	}
	t.ob = ob
	ob.Login(context.Background(), outbox.Session{UserID: w.user})
}

// Run plays the chaos phase, then a calm phase that must drain the queue,
// then checks the invariants. It returns the violations (empty: passed).
func (w *World) Run() []string {
	steps := 150 + w.rng.IntN(300)
	for i := 0; i < steps && len(w.failed) == 0; i++ {
		w.stats.Steps++
		w.chaosStep()
	}
	if len(w.failed) == 0 {
		w.calmDown()
	}
	if len(w.failed) == 0 {
		w.check()
	}
	w.stats.Effects, w.stats.Requests, w.stats.Crossed = len(w.srv.Effects), w.srv.Requests, w.srv.Crossed
	return w.failed
}

func (w *World) pick() *Tab { return w.tabs[w.rng.IntN(len(w.tabs))] }

func (w *World) advance(d time.Duration) {
	w.now = w.now.Add(d)
	if w.offline && !w.now.Before(w.offlineUntil) {
		w.online()
	}
	for _, t := range w.tabs {
		if t.frozen && w.now.Sub(epoch).Milliseconds() >= t.thawAt {
			t.frozen = false
		}
	}
}

// chaosStep makes one random move of the world: the order of the random
// draws is part of what a seed reproduces.
func (w *World) chaosStep() {
	switch r := w.rng.IntN(100); {
	case r < 40:
		w.runFlushingTab()
	case r < 52:
		w.advance(time.Duration(w.rng.IntN(300)) * time.Millisecond)
	case r < 54:
		w.advance(time.Duration(1+w.rng.IntN(5)) * time.Second)
	case r < 62:
		w.enqueue()
	case r < 78:
		w.trigger(w.pick(), "trigger")
	case r < 82:
		w.maybeCrash()
	case r < 85:
		w.maybeFreeze()
	case r < 88:
		w.reopenClosed()
	case r < 90:
		w.maybeStorm()
	case r < 92:
		w.flipAuth()
	case r < 96:
		w.appResolve(w.pick())
	case r < 97:
		if w.chance(0.2) || (w.opt.BreakSessionCheck && w.chance(0.8)) { // the checker's test wants many switches
			w.switchUser(w.chance(0.5))
		}
	case r < 99:
		w.maybeOffline()
	}
}

// runFlushingTab runs a flushing tab to its next yield point, or lets time
// pass when none is flushing.
func (w *World) runFlushingTab() {
	var active []*Tab
	for _, t := range w.tabs {
		if t.flushing && !t.frozen {
			active = append(active, t)
		}
	}
	if len(active) > 0 {
		w.resume(active[w.rng.IntN(len(active))])
	} else {
		w.advance(time.Duration(w.rng.IntN(200)) * time.Millisecond)
	}
}

func (w *World) maybeCrash() {
	if w.chance(w.pCrash * 10) {
		t := w.pick()
		for _, f := range w.tabs { // prefer a tab that is mid-flush
			if f.flushing && w.rng.IntN(2) == 0 {
				t = f
			}
		}
		w.crash(t)
	}
}

func (w *World) maybeFreeze() {
	if t := w.pick(); t.flushing && w.chance(w.pFreeze*10) {
		t.frozen = true
		t.thawAt = w.now.Sub(epoch).Milliseconds() + int64(300+w.rng.IntN(6000))
		w.stats.Freezes++
		w.tracef("%s frozen", t.owner)
	}
}

func (w *World) reopenClosed() {
	for _, t := range w.tabs {
		if !t.alive && w.chance(0.5) {
			w.start(t)
			w.tracef("%s reopened", t.owner)
		}
	}
}

// maybeStorm makes the server answer 503, or 429 with or without a
// Retry-After, for a few seconds.
func (w *World) maybeStorm() {
	if w.chance(0.3) {
		w.srv.StormUntil = w.now.Add(time.Duration(1+w.rng.IntN(8)) * time.Second)
		w.srv.StormStatus, w.srv.StormRetryAfter = 503, ""
		switch w.rng.IntN(3) {
		case 1:
			w.srv.StormStatus, w.srv.StormRetryAfter = 429, strconv.Itoa(1+w.rng.IntN(3))
		case 2:
			w.srv.StormStatus = 429
			w.srv.StormRetryAfter = w.now.Add(2 * time.Second).Format("Mon, 02 Jan 2006 15:04:05 GMT")
		}
		w.tracef("storm %d until +%v", w.srv.StormStatus, w.srv.StormUntil.Sub(w.now))
	}
}

// flipAuth expires the user's authentication, or restores it and resumes
// a tab's queue.
func (w *World) flipAuth() {
	if w.chance(0.3) {
		w.srv.AuthExpired[w.user] = true
		w.tracef("auth of %s expired", w.user)
	} else if w.srv.AuthExpired[w.user] && w.chance(0.5) {
		delete(w.srv.AuthExpired, w.user)
		if t := w.pick(); t.alive {
			_ = t.ob.Resume(context.Background())
		}
		w.tracef("%s re-authenticated", w.user)
	}
}

func (w *World) maybeOffline() {
	if !w.offline && w.chance(0.3) {
		w.offline = true
		w.offlineUntil = w.now.Add(time.Duration(1+w.rng.IntN(20)) * time.Second)
		w.tracef("offline until +%v", w.offlineUntil.Sub(w.now))
	}
}

// online ends an offline period: every live tab hears the online event
// (Reconnected, then a flush trigger).
func (w *World) online() {
	w.offline = false
	w.tracef("online")
	for _, t := range w.tabs {
		if t.alive {
			t.ob.Reconnected()
		}
	}
	if t := w.pick(); t.alive {
		w.trigger(t, "online")
	}
}

// shape sometimes gives a payload the form of a JSON document (which the
// batch format embeds as is), a JSON string, text with escapes, or (unless
// Options.UTF8Only) bytes that are not UTF-8: alone or in a batch, the
// receiver must see the same bytes.
func (w *World) shape(p string) string {
	n := w.rng.IntN(8)
	if n == 2 && w.opt.UTF8Only {
		n = 3
	}
	switch n {
	case 0:
		return `{"p": "` + p + `", "n": [1, 2.5e3, true, null]}`
	case 1:
		return `"` + p + `"`
	case 2:
		return p + "\xff\xfe"
	case 3:
		return p + " \"quoted\"\n\tÿ€ "
	case 4:
		return "42"
	}
	return p
}

func (w *World) enqueue() {
	t := w.pick()
	if !t.alive {
		return
	}
	ops := []string{"comment", "title", "tags", "star"}
	op := ops[w.rng.IntN(len(ops))]
	entity := "n" + strconv.Itoa(w.rng.IntN(4))
	if w.rng.IntN(5) == 0 {
		entity = "" // its own group
	}
	payload := entity + ":" + strconv.Itoa(w.ids)
	switch w.rng.IntN(40) {
	case 0:
		payload += ":bad"
	case 1:
		payload += ":conflict"
	case 2, 3:
		payload += ":" + strings.Repeat("x", 20) // blob store
	}
	payload = w.shape(payload)
	var deps []string
	if w.rng.IntN(6) == 0 {
		if w.ids > 0 {
			d := "r" + strconv.Itoa(1+w.rng.IntN(w.ids))
			// The app names a record of the user it is enqueuing for:
			// the tab's view of the session, which may lag a switch.
			if in, ok := w.enq[d]; ok && in.user == t.ob.Session().UserID {
				deps = []string{d}
			}
		}
	}
	res, err := t.ob.Enqueue(context.Background(), outbox.Op{OperationType: op, OperationKey: op + ":" + entity,
		EntityType: "note", EntityID: entity, Payload: []byte(payload), DependencyIDs: deps})
	if err != nil {
		if errors.Is(err, errCrashed) {
			return
		}
		w.violation("enqueue: %v", err)
		return
	}
	w.stats.Enqueued++
	switch res.Action {
	case queue.ActionAppended:
		w.enq[res.ID] = &enqInfo{user: res.Record.UserID, entity: res.Record.EntityKey(), key: res.Record.IdempotencyKey,
			hash: res.Record.PayloadHash, seq: res.Record.Seq, deps: deps, op: op}
	case queue.ActionReplaced, queue.ActionMerged:
		w.stats.Coalesced++
		w.enq[res.ID].hash = res.Record.PayloadHash
	default:
		w.stats.Coalesced++
	}
	w.tracef("%s enqueue %s %s -> %s %s", t.owner, op, entity, res.ID, res.Action)
}
