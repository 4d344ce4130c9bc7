//go:build js && wasm

package browser

import (
	"context"
	"os"
	"strconv"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/idbstore"
	"github.com/tabfence/tabfence/outbox/queue"
)

// mockReceiver replaces fetch in this page with a tiny receiver: fencing
// tokens per resource (issued and highest accepted), idempotency by key,
// injectable failures and held answers. Two Runtimes in one page share it,
// as two tabs share a server.
const mockReceiver = `(() => {
  const rx = globalThis.__rx = {issued: {}, accepted: {}, keys: {}, effects: 0, sends: 0, fail: 0, holdToken: 0, held: [], holdFence: false, fenceHeld: [], log: []};
  globalThis.__realFetch = globalThis.__realFetch || globalThis.fetch;
  globalThis.fetch = async (url, init) => {
    const u = new URL(url, location.href);
    const h = new Headers(init && init.headers);
    if (u.pathname.startsWith('/fence/')) {
      const res = decodeURIComponent(u.pathname.slice(7));
      if (rx.holdFence) await new Promise(r => rx.fenceHeld.push(r));
      rx.issued[res] = (rx.issued[res] || 0) + 1;
      return new Response(JSON.stringify({resource: res, token: rx.issued[res]}), {status: 200});
    }
    rx.sends++;
    const key = h.get('Idempotency-Key'), res = h.get('X-Client-Resource'), tok = +h.get('X-Client-Fencing-Token');
    rx.log.push({key, tok, user: h.get('X-Demo-User')});
    if (rx.fail > 0) { rx.fail--; return new Response('{}', {status: 500}); }
    if (res) {
      if (tok < (rx.accepted[res] || 0)) return new Response('{}', {status: 409, headers: {'X-Fencing-Highest': String(rx.accepted[res])}});
      rx.accepted[res] = tok;
    }
    if (rx.keys[key]) return new Response('{"replay":true}', {status: 200, headers: {'Idempotent-Replayed': 'true'}});
    rx.keys[key] = true; rx.effects++;
    if (rx.holdToken && tok === rx.holdToken) await new Promise(r => rx.held.push(r));
    return new Response('{}', {status: 201});
  };
})()`

// installMock installs the mock for one test and puts the browser's fetch
// back afterwards: the test runner itself (wasmbrowsertest's file shim, used
// to capture example output) talks to its server with fetch.
func installMock(t *testing.T) js.Value {
	t.Helper()
	js.Global().Call("eval", mockReceiver)
	t.Cleanup(func() { js.Global().Set("fetch", js.Global().Get("__realFetch")) })
	return js.Global().Get("__rx")
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func openRT(t *testing.T, name string, mut func(*RuntimeConfig)) *Runtime {
	t.Helper()
	cfg := RuntimeConfig{
		Name: name,
		Outbox: outbox.Config{Endpoint: "/api/notes", Policies: map[string]queue.Policy{"put": {Dedupe: queue.Append}},
			Backoff: &outbox.Backoff{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}},
		Authorize: func(_ context.Context, req outbox.Request, h outbox.Header) error {
			h["X-Demo-User"] = req.UserID
			return nil
		},
		Session: outbox.Session{UserID: "alice"},
		Watch:   WatchConfig{StallAfter: 300 * time.Millisecond, StatusTimeout: 500 * time.Millisecond},
	}
	if mut != nil {
		mut(&cfg)
	}
	r, err := OpenRuntime(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

func uniq(p string) string { return p + strconv.FormatInt(time.Now().UnixNano(), 36) }

func acked(t *testing.T, r *Runtime) int {
	st, err := r.Status(context.Background())
	require.NoError(t, err)
	return st.Acked
}

// Two Runtimes in one page contend for the Web Lock like two tabs, share
// IndexedDB and the channel: every enqueue is sent once.
func TestRuntimeTwoInstancesDeliverOnce(t *testing.T) {
	rx := installMock(t)
	name := uniq("two")
	a, b := openRT(t, name, nil), openRT(t, name, nil)
	ctx := context.Background()
	skips := 0
	b.OnEvent(func(e outbox.Event) {
		if e.Kind == outbox.EventSkipLocked {
			skips++
		}
	})
	var pushed RuntimeStatus
	a.OnStatus(func(s RuntimeStatus) { pushed = s })
	const n = 60
	for i := 0; i < n; i++ {
		r := a
		if i%2 == 1 {
			r = b
		}
		_, err := r.Enqueue(ctx, outbox.Op{OperationType: "put", EntityType: "note", EntityID: "n" + strconv.Itoa(i%5), Payload: []byte(`{"i":` + strconv.Itoa(i) + `}`)})
		require.NoError(t, err)
	}
	waitFor(t, "all acked", 10*time.Second, func() bool { return acked(t, a) == n })
	if got := rx.Get("effects").Int(); got != n {
		t.Fatalf("effects %d, want %d", got, n)
	}
	waitFor(t, "status pushed", 10*time.Second, func() bool { return pushed.Acked == n && pushed.Pending == 0 })
	if pushed.OwnerID == "" || pushed.LeaseToken == 0 {
		t.Fatalf("status without owner: %+v", pushed)
	}
	t.Logf("sends %d, skip-locked in b: %d", rx.Get("sends").Int(), skips)
}

// silentOwner opens a runtime that never answers status questions (as a
// frozen tab: it hears the channel but stays silent), enqueues five records
// and waits until it owns the queue and its first request hangs forever.
func silentOwner(t *testing.T, rx js.Value, name string) *Runtime {
	t.Helper()
	a := openRT(t, name, nil)
	a.mute.Store(true)
	rx.Set("holdToken", 1) // the first owner's requests never come back
	for i := 0; i < 5; i++ {
		_, err := a.Enqueue(context.Background(), outbox.Op{OperationType: "put", EntityType: "note", EntityID: "n", Payload: []byte("{}")})
		require.NoError(t, err)
	}
	waitFor(t, "a owns and its send hangs", 3*time.Second, func() bool { return rx.Get("held").Length() == 1 })
	return a
}

// A silent owner (as a frozen tab: it hears the channel but never answers)
// holding a request forever: the other instance asks, gets no answer,
// steals the lock with a higher token and delivers; the old owner, when its
// request finally returns, changes nothing.
func TestRuntimeStealsFromSilentOwner(t *testing.T) {
	rx := installMock(t)
	name := uniq("steal")
	ctx := context.Background()
	a := silentOwner(t, rx, name)
	start := time.Now()
	b := openRT(t, name, nil)
	waitFor(t, "b delivers everything", 10*time.Second, func() bool { return acked(t, b) == 5 })
	took := time.Since(start)
	st, _ := b.Status(ctx)
	if st.OwnerID == a.ID() || st.LeaseToken < 2 {
		t.Fatalf("lease not taken over: %+v", st)
	}
	if rx.Get("effects").Int() != 5 {
		t.Fatalf("effects %d, want 5", rx.Get("effects").Int())
	}
	// wake the old owner: its answer arrives, its lease is stale
	before, _ := b.store.List(ctx, outbox.Filter{})
	held := rx.Get("held")
	for i := 0; i < held.Length(); i++ {
		held.Index(i).Invoke()
	}
	time.Sleep(300 * time.Millisecond)
	after, _ := b.store.List(ctx, outbox.Filter{})
	for i := range before {
		if before[i].UpdatedAt != after[i].UpdatedAt || before[i].Status != after[i].Status {
			t.Fatalf("the old owner changed %s: %+v -> %+v", before[i].ID, before[i].Status, after[i].Status)
		}
	}
	waitFor(t, "a stepping down", 5*time.Second, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return !a.owning
	})
	t.Logf("queue moving again after %v (stall 300ms + timeout 500ms)", took)
}

// Two tabs that steal from a silent owner at the same moment: the Web Lock
// goes to the later thief, the IndexedDB lease possibly to the other. Neither
// may take the other for the silent owner (each one's "stolen!" names the
// owner it saw), and whichever came away without the queue tries again at
// once: the queue moves without waiting for another watchdog round.
func TestRuntimeConcurrentSteals(t *testing.T) {
	rx := installMock(t)
	name := uniq("steal2")
	a := silentOwner(t, rx, name)
	// Watchdogs too slow to act within the test: only the steals below.
	slow := func(c *RuntimeConfig) { c.Watch = WatchConfig{StallAfter: time.Minute, StatusTimeout: time.Minute} }
	b, c := openRT(t, name, slow), openRT(t, name, slow)
	for _, r := range []*Runtime{b, c} {
		r.mu.Lock()
		r.remoteOwner = a.ID() // as the owner's last "status!" told them
		r.mu.Unlock()
	}
	start := time.Now()
	b.requestSteal()
	c.requestSteal()
	waitFor(t, "everything delivered", 5*time.Second, func() bool { return acked(t, b) == 5 })
	if rx.Get("effects").Int() != 5 {
		t.Fatalf("effects %d, want 5", rx.Get("effects").Int())
	}
	t.Logf("delivered %v after two steals at once", time.Since(start))
}

// Without navigator.locks the IndexedDB lease elects the flush owner.
func TestRuntimeLeaseFallback(t *testing.T) {
	rx := installMock(t)
	name := uniq("lease")
	ctx := context.Background()
	nolocks := func(c *RuntimeConfig) { c.NoWebLocks = true }
	a, b := openRT(t, name, nolocks), openRT(t, name, nolocks)
	for i := 0; i < 20; i++ {
		r := a
		if i%2 == 1 {
			r = b
		}
		_, err := r.Enqueue(ctx, outbox.Op{OperationType: "put", EntityID: "e" + strconv.Itoa(i%3), Payload: []byte("{}")})
		require.NoError(t, err)
	}
	waitFor(t, "all acked", 10*time.Second, func() bool { return acked(t, a) == 20 })
	if rx.Get("effects").Int() != 20 {
		t.Fatalf("effects %d", rx.Get("effects").Int())
	}
}

// A 500 storm is retried with backoff by the timer; records of a user who
// logged out are never sent under the next user.
func TestRuntimeRetryAndSessionBoundary(t *testing.T) {
	rx := installMock(t)
	name := uniq("sess")
	ctx := context.Background()
	a := openRT(t, name, nil)
	rx.Set("fail", 3)
	_, err := a.Enqueue(ctx, outbox.Op{OperationType: "put", EntityID: "x", Payload: []byte("{}")})
	require.NoError(t, err)
	waitFor(t, "acked after the storm", 5*time.Second, func() bool { return acked(t, a) == 1 })
	require.NoError(t, a.Pause(ctx))
	for i := 0; i < 3; i++ {
		a.Enqueue(ctx, outbox.Op{OperationType: "put", EntityID: "y", Payload: []byte("{}")})
	}
	_, err = a.Logout(ctx, false)
	require.NoError(t, err)
	b := openRT(t, name, func(c *RuntimeConfig) { c.Session = outbox.Session{UserID: "bob"} })
	b.Enqueue(ctx, outbox.Op{OperationType: "put", EntityID: "z", Payload: []byte("{}")})
	require.NoError(t, b.Resume(ctx))
	waitFor(t, "bob's record acked", 5*time.Second, func() bool { return acked(t, b) == 2 })
	time.Sleep(200 * time.Millisecond)
	log := rx.Get("log")
	alice := 0
	for i := 0; i < log.Length(); i++ {
		if log.Index(i).Get("user").String() == "alice" {
			alice++
		}
	}
	if alice != 4 { // 3 failures + 1 success before the logout, nothing after
		t.Fatalf("alice's requests: %d", alice)
	}
	st, _ := b.Status(ctx)
	if st.Pending != 3 {
		t.Fatalf("alice's records must stay pending: %+v", st.Projection)
	}
}

// Logs the cost of the flush path: one ordered entity and eight entities,
// against the in-page mock receiver (fetch costs ~nothing), for the store's
// durabilities.
func TestRuntimeFlushCost(t *testing.T) {
	if os.Getenv("TABFENCE_COST") == "" {
		t.Skip("set TABFENCE_COST=1 to log the flush path's cost per durability")
	}
	installMock(t)
	ctx := context.Background()
	for _, dur := range []string{"strict", "default", "relaxed"} {
		for _, entities := range []int{1, 8} {
			name := uniq("cost")
			st, err := idbstore.Open(ctx, dbName(name), idbstore.WithDurability(dur))
			require.NoError(t, err)
			r := openRT(t, name, func(c *RuntimeConfig) {
				c.Store = st
				c.Session = outbox.Session{}
				c.StatusDebounce = 10 * time.Second
			})
			r.ob.Login(context.Background(), outbox.Session{UserID: "alice"})
			require.NoError(t, r.ob.Pause(ctx))
			const n = 200
			start := time.Now()
			for i := 0; i < n; i++ {
				_, err := r.ob.Enqueue(ctx, outbox.Op{OperationType: "put", EntityType: "note", EntityID: "e" + strconv.Itoa(i%entities), Payload: []byte("{}")})
				require.NoError(t, err)
			}
			enq := time.Since(start)
			require.NoError(t, r.ob.Resume(ctx))
			start = time.Now()
			rep, skipped, err := r.Flush(ctx)
			if err != nil || rep.Acked != n {
				t.Fatalf("flush %+v skipped=%v %v", rep, skipped, err)
			}
			fl := time.Since(start)
			t.Logf("%-8s entities=%d: enqueue %.2f ms/op, flush %.2f ms/record", dur, entities, float64(enq.Microseconds())/1000/n, float64(fl.Microseconds())/1000/n)
			r.Close()
			st.Close()
		}
	}
}

// Logs what the Runtime adds to a durable enqueue (announce, status push,
// flush hint) over the store's own transaction.
func TestRuntimeEnqueueCost(t *testing.T) {
	installMock(t)
	ctx := context.Background()
	r := openRT(t, uniq("enqcost"), nil)
	require.NoError(t, r.Pause(ctx))
	const n = 200
	op := outbox.Op{OperationType: "put", EntityType: "note", Payload: []byte(`{"id":"x","text":"hello"}`)}
	start := time.Now()
	for i := 0; i < n; i++ {
		op.EntityID = "a" + strconv.Itoa(i)
		_, err := r.ob.Enqueue(ctx, op)
		require.NoError(t, err)
	}
	store := time.Since(start)
	start = time.Now()
	for i := 0; i < n; i++ {
		op.EntityID = "b" + strconv.Itoa(i)
		_, err := r.Enqueue(ctx, op)
		require.NoError(t, err)
	}
	full := time.Since(start)
	t.Logf("enqueue: store %.2f ms/op, runtime %.2f ms/op", float64(store.Microseconds())/1000/n, float64(full.Microseconds())/1000/n)
}

// Every committed enqueue is followed by an OUTBOX_CHANGED posted after it
// returned (the announcement runs in a later task), and a burst is announced
// a few times, not once per record (leading and trailing edge).
func TestRuntimeAnnouncesAfterCommitCoalesced(t *testing.T) {
	installMock(t)
	ctx := context.Background()
	r := openRT(t, uniq("announce"), nil)
	require.NoError(t, r.Pause(ctx))
	ch, err := channel.Open(r.LockName())
	require.NoError(t, err)
	defer ch.Close()
	var mu sync.Mutex
	var got []time.Time
	defer ch.Subscribe(func(m channel.Message) {
		if m.Kind == kindOutboxChanged {
			mu.Lock()
			got = append(got, time.Now())
			mu.Unlock()
		}
	})()
	count := func() (int, time.Time) {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return 0, time.Time{}
		}
		return len(got), got[len(got)-1]
	}

	// A lone enqueue is announced at once (well before the interval).
	start := time.Now()
	_, err = r.Enqueue(ctx, outbox.Op{OperationType: "put", EntityID: "lone", Payload: []byte(`{}`)})
	require.NoError(t, err)
	waitFor(t, "the lone announcement", 2*time.Second, func() bool { n, _ := count(); return n == 1 })
	if _, at := count(); at.Before(start) {
		t.Fatal("announced before the enqueue")
	}
	time.Sleep(2 * announceEvery)

	// A burst: the last announcement comes after the last enqueue returned.
	const n = 30
	var last time.Time
	for i := 0; i < n; i++ {
		_, err := r.Enqueue(ctx, outbox.Op{OperationType: "put", EntityID: "b" + strconv.Itoa(i), Payload: []byte(`{}`)})
		require.NoError(t, err)
		last = time.Now()
	}
	waitFor(t, "an announcement after the burst", 2*time.Second, func() bool { _, at := count(); return !at.Before(last) })
	time.Sleep(2 * announceEvery)
	total, _ := count()
	if burst := total - 1; burst < 1 || burst >= n {
		t.Fatalf("%d announcements for a burst of %d enqueues", burst, n)
	}
	t.Logf("%d announcements for %d enqueues", total-1, n)
}

// dbName is the database of queue q at protocol 1.
func dbName(q string) string {
	n, _ := queue.Names(q, 1)
	return n.Database
}
