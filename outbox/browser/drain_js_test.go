//go:build js && wasm

package browser

import (
	"context"
	"strconv"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox"
)

func passive(c *RuntimeConfig) { c.Passive = true }

func enqueueN(t *testing.T, r *Runtime, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := r.Enqueue(context.Background(), outbox.Op{OperationType: "put", EntityType: "note", EntityID: "d" + strconv.Itoa(i), Payload: []byte("{}")})
		require.NoError(t, err)
	}
}

func drain(t *testing.T, r *Runtime, o DrainOptions) DrainReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := r.Drain(ctx, o)
	require.NoError(t, err)
	return rep
}

// A drain sends what is due once and says the sync is done; a second one
// finds nothing.
func TestDrainSendsOnceAndReportsDone(t *testing.T) {
	rx := installMock(t)
	p := openRT(t, uniq("drain"), passive)
	enqueueN(t, p, 3)
	rep := drain(t, p, DrainOptions{})
	require.Equal(t, 3, rep.Acked, "%+v", rep)
	require.Equal(t, "done", rep.Reason)
	require.False(t, rep.Retry)
	require.Zero(t, rep.Remaining)
	require.Equal(t, 3, rx.Get("effects").Int())
	rep = drain(t, p, DrainOptions{})
	require.Equal(t, DrainReport{Reason: "done"}, rep)
	require.Equal(t, 3, rx.Get("effects").Int())
	require.Equal(t, 3, acked(t, p))
	require.Equal(t, p.LockName(), p.SyncTag())
}

// A passive runtime (a worker) never flushes by itself: not at start, not
// on an enqueue, not on another tab's OUTBOX_CHANGED. Only Drain sends.
func TestPassiveRuntimeFlushesOnlyOnDrain(t *testing.T) {
	rx := installMock(t)
	name := uniq("passive")
	first := openRT(t, name, passive)
	enqueueN(t, first, 3)
	require.NoError(t, first.Close())
	p := openRT(t, name, passive) // starts with due records
	var pushed RuntimeStatus
	p.OnStatus(func(s RuntimeStatus) { pushed = s })
	ch, err := channel.Open(p.LockName())
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.Send(channel.NewSequencer("outbox-tab:other", "other", 1), kindOutboxChanged, js.Undefined())
	require.NoError(t, err)
	enqueueN(t, p, 2) // the same entities: 5 records, appended
	// The status push follows the enqueue's later task (its flush hint):
	// a runtime that reacted to any of it has asked for a fence by now.
	waitFor(t, "status pushed", 5*time.Second, func() bool { return pushed.Pending == 5 })
	require.Zero(t, rx.Get("sends").Int(), "a passive runtime sent by itself")
	require.Zero(t, js.Global().Get("Object").Call("keys", rx.Get("issued")).Length(), "a passive runtime asked for a fence by itself")
	rep := drain(t, p, DrainOptions{})
	require.Equal(t, 5, rep.Acked, "%+v", rep)
	require.Equal(t, "done", rep.Reason)
	require.Equal(t, 5, rx.Get("effects").Int())
}

// A drain waits while a tab holds the flush lock (the tab is flushing),
// then finds what the tab left: nothing.
func TestDrainWaitsForTheTabsFlush(t *testing.T) {
	rx := installMock(t)
	name := uniq("wait")
	a := silentOwner(t, rx, name) // owns, its first send hangs
	p := openRT(t, name, passive)
	done := make(chan DrainReport, 1)
	var derr error // read after done
	go func() {
		// Not drain(): require must not run outside the test's goroutine.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rep, err := p.Drain(ctx, DrainOptions{})
		derr = err
		done <- rep
	}()
	waitFor(t, "the drain queued for the lock", 5*time.Second, func() bool {
		s, err := locks.Query(context.Background())
		return err == nil && s.Holds(p.LockName()) && s.Waiting(p.LockName()) > 0
	})
	select {
	case rep := <-done:
		t.Fatalf("drain returned while the tab held the lock: %+v", rep)
	default:
	}
	rx.Set("holdToken", 0)
	held := rx.Get("held")
	for i := 0; i < held.Length(); i++ {
		held.Index(i).Invoke()
	}
	var rep DrainReport
	select {
	case rep = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("drain never got the lock")
	}
	require.NoError(t, derr)
	require.Equal(t, "done", rep.Reason, "%+v", rep)
	require.False(t, rep.Retry)
	require.Zero(t, rep.Remaining)
	require.Equal(t, 5, rx.Get("effects").Int())
	require.Equal(t, 5, acked(t, a))
}

// A receiver failing with 500: the records stay queued and the sync asks
// for a retry; on the last chance it does not, and the records are still
// there, not dead-lettered.
func TestDrainServerErrorRetriesButNotOnLastChance(t *testing.T) {
	rx := installMock(t)
	p := openRT(t, uniq("5xx"), passive)
	enqueueN(t, p, 2)
	rx.Set("fail", 1000)
	rep := drain(t, p, DrainOptions{})
	require.Equal(t, "more", rep.Reason, "%+v", rep)
	require.True(t, rep.Retry)
	require.Equal(t, 2, rep.Remaining)
	require.Zero(t, rep.Acked)
	rep = drain(t, p, DrainOptions{LastChance: true})
	require.Equal(t, "more", rep.Reason, "%+v", rep)
	require.False(t, rep.Retry)
	require.Equal(t, 2, rep.Remaining)
	st, err := p.Status(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, st.Pending+st.Failed+st.Sending, "%+v", st)
	require.Zero(t, st.DeadLetter+st.Terminal)
	rx.Set("fail", 0)
	waitFor(t, "the backoff", 5*time.Second, func() bool { return drain(t, p, DrainOptions{}).Reason == "done" })
	require.Equal(t, 2, acked(t, p))
}

// No session: nothing to send for anyone, and no retry.
func TestDrainWithoutSession(t *testing.T) {
	rx := installMock(t)
	p := openRT(t, uniq("nosess"), func(c *RuntimeConfig) { c.Passive, c.Session = true, outbox.Session{} })
	rep := drain(t, p, DrainOptions{})
	require.Equal(t, DrainReport{Reason: "no-session"}, rep)
	require.Zero(t, rx.Get("sends").Int())
	require.Zero(t, js.Global().Get("Object").Call("keys", rx.Get("issued")).Length())
}

// Without Web Locks a drain polls the IndexedDB lease: while another
// holder has it the drain waits and gives up at its deadline ("busy",
// retry; one skip event for the wait, not one a poll), and once it is free
// the drain sends.
func TestDrainLeaseFallback(t *testing.T) {
	rx := installMock(t)
	p := openRT(t, uniq("drainlease"), func(c *RuntimeConfig) { c.Passive, c.NoWebLocks = true, true })
	var mu sync.Mutex
	var skips, acks int
	defer p.OnEvent(func(e outbox.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case outbox.EventSkipLocked:
			skips++
		case outbox.EventAck:
			acks++
		}
	})()
	enqueueN(t, p, 2)
	ctx := context.Background()
	held, err := p.ob.Acquire(ctx, "another-tab", false)
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
	rep, err := p.Drain(dctx, DrainOptions{})
	cancel()
	require.NoError(t, err)
	require.Equal(t, "busy", rep.Reason, "%+v", rep)
	require.True(t, rep.Retry)
	require.Equal(t, 2, rep.Remaining)
	require.Zero(t, rx.Get("sends").Int())
	require.NoError(t, p.ob.Release(ctx, held))
	rep = drain(t, p, DrainOptions{})
	require.Equal(t, "done", rep.Reason, "%+v", rep)
	require.Equal(t, 2, rep.Acked)
	// The events arrive in order: the acks follow every skip of the wait.
	waitFor(t, "the ack events", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acks == 2
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, skips, "skip events of one wait for the lease")
}

// A worker of an older payload schema leaves a newer build's records alone
// and does not ask for a retry that would send nothing; the newer worker
// sends them.
func TestDrainLeavesNewerSchemaAlone(t *testing.T) {
	rx := installMock(t)
	name := uniq("drainschema")
	schema := func(v int) func(*RuntimeConfig) {
		return func(c *RuntimeConfig) { c.Passive, c.Outbox.SchemaVersion = true, v }
	}
	newer := openRT(t, name, schema(2))
	enqueueN(t, newer, 2)
	older := openRT(t, name, schema(1))
	rep := drain(t, older, DrainOptions{})
	require.Equal(t, DrainReport{Reason: "done"}, rep)
	require.Zero(t, rx.Get("sends").Int())
	rep = drain(t, newer, DrainOptions{})
	require.Equal(t, 2, rep.Acked, "%+v", rep)
	require.Equal(t, "done", rep.Reason)
}

// An empty queue costs nothing: the drain says done at once, without
// waiting for the flush lock a tab holds or asking for a fence.
func TestDrainEmptyQueueTakesNothing(t *testing.T) {
	rx := installMock(t)
	p := openRT(t, uniq("drainempty"), passive)
	js.Global().Set("__emptyLock", p.LockName())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := jsglue.Await(ctx, js.Global().Call("eval", `new Promise((held) => navigator.locks.request(__emptyLock, () => { held(); return new Promise((r) => globalThis.__releaseEmpty = r); }))`))
	require.NoError(t, err)
	defer js.Global().Get("__releaseEmpty").Invoke()
	dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer dcancel()
	rep, err := p.Drain(dctx, DrainOptions{})
	require.NoError(t, err)
	require.Equal(t, DrainReport{Reason: "done"}, rep)
	require.NoError(t, dctx.Err(), "the drain waited for the lock")
	require.Zero(t, js.Global().Get("Object").Call("keys", rx.Get("issued")).Length(), "an empty drain asked for a fence")
}

// A page's enqueue announced while the worker owns is sent by the worker's
// drain, not left for the page's watchdog.
func TestDrainPicksUpAPagesEnqueue(t *testing.T) {
	rx := installMock(t)
	name := uniq("drainkick")
	p := openRT(t, name, passive)
	enqueueN(t, p, 1)
	rx.Set("holdToken", 1) // the worker's first send waits
	done := make(chan DrainReport, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rep, _ := p.Drain(ctx, DrainOptions{})
		done <- rep
	}()
	waitFor(t, "the worker's send held", 5*time.Second, func() bool { return rx.Get("held").Length() == 1 })
	select {
	case <-p.kickCh: // the worker's own enqueue's hint, read before its flush
	default:
	}
	page := openRT(t, name, func(c *RuntimeConfig) { c.Watch.StallAfter = time.Minute })
	_, err := page.Enqueue(context.Background(), outbox.Op{OperationType: "put", EntityType: "note", EntityID: "page", Payload: []byte("{}")})
	require.NoError(t, err)
	waitFor(t, "the page's announcement", 5*time.Second, func() bool { return len(p.kickCh) == 1 })
	rx.Set("holdToken", 0)
	rx.Get("held").Index(0).Invoke()
	var rep DrainReport
	select {
	case rep = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain never ended")
	}
	require.Equal(t, 2, rep.Acked, "the worker left the page's record: %+v", rep)
	require.Equal(t, "done", rep.Reason)
}

// A worker granted the lock answers the tabs' watchdog while it takes the
// fence (a slow fencing-token request): a tab with due work asks, hears it
// and does not steal; the worker then sends everything.
func TestDrainTakingTheFenceIsNotStolenFrom(t *testing.T) {
	rx := installMock(t)
	name := uniq("drainfence")
	p := openRT(t, name, passive)
	enqueueN(t, p, 2)
	ch, err := channel.Open(p.LockName())
	require.NoError(t, err)
	defer ch.Close()
	var mu sync.Mutex
	seen := map[string]int{}
	defer ch.Subscribe(func(m channel.Message) {
		mu.Lock()
		seen[m.Kind]++
		mu.Unlock()
	})()
	rx.Set("holdFence", true)
	done := make(chan DrainReport, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rep, _ := p.Drain(ctx, DrainOptions{})
		done <- rep
	}()
	waitFor(t, "the worker's fence request held", 5*time.Second, func() bool { return rx.Get("fenceHeld").Length() == 1 })
	tab := openRT(t, name, nil) // due work, the lock held: its watchdog asks
	waitFor(t, "the tab asked twice and heard answers", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[kindStatusAsk] >= 2 && seen[kindStatusAnswer] >= 2
	})
	rx.Set("holdFence", false)
	rx.Get("fenceHeld").Index(0).Invoke()
	var rep DrainReport
	select {
	case rep = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the drain never ended")
	}
	require.Equal(t, "done", rep.Reason, "%+v", rep)
	require.Equal(t, 2, rep.Acked, "%+v", rep)
	require.Equal(t, 1, rx.Get("issued").Get(js.Global().Get("Object").Call("keys", rx.Get("issued")).Index(0).String()).Int(), "the tab stole and asked for a fence")
	require.Equal(t, 2, acked(t, tab))
}

// holdLock holds name's Web Lock from JS (a tab flushing) until the test
// ends.
func holdLock(t *testing.T, name string) {
	t.Helper()
	js.Global().Set("__holdName", name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := jsglue.Await(ctx, js.Global().Call("eval", `new Promise((held) => navigator.locks.request(__holdName, () => { held(); return new Promise((r) => globalThis.__releaseHold = r); }))`))
	require.NoError(t, err)
	release := js.Global().Get("__releaseHold")
	t.Cleanup(func() { release.Invoke() })
}

// Close ends a drain waiting for the lock (ErrRuntimeClosed, its lock
// request gone), and a drain waiting behind another drain keeps its own
// deadline.
func TestDrainContexts(t *testing.T) {
	installMock(t)
	p := openRT(t, uniq("drainctx"), passive)
	enqueueN(t, p, 1)
	holdLock(t, p.LockName())
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := p.Drain(ctx, DrainOptions{})
		first <- err
	}()
	queued := func() bool {
		s, err := locks.Query(context.Background())
		return err == nil && s.Waiting(p.LockName()) > 0
	}
	waitFor(t, "the first drain queued for the lock", 5*time.Second, queued)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	rep, err := p.Drain(ctx, DrainOptions{})
	cancel()
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "the second drain waited for the first")
	require.Equal(t, "busy", rep.Reason, "%+v", rep)
	require.True(t, rep.Retry)

	require.NoError(t, p.Close())
	select {
	case err := <-first:
		require.ErrorIs(t, err, ErrRuntimeClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("close left the drain waiting")
	}
	waitFor(t, "the lock request aborted", 5*time.Second, func() bool { return !queued() })
}
