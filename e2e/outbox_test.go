//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// The outbox end to end: real tabs of one browser, the demo's notes list
// (cmd/tabfence/server/demo/notes.js, tf.outbox) and the real server in-process
// on loopback with a throwaway SQLite database. A middleware in front of
// POST /api/notes observes every request and injects faults.

// noteCtl is the fault injector and observer of POST /api/notes.
type noteCtl struct {
	mu         sync.Mutex
	fail500    int                    // answer 500 to the next n requests
	failText   string                 // answer 500 to every request whose body contains it
	r429       int                    // answer 429 to the next n requests
	retryAfter string                 // Retry-After of those 429s
	delay      time.Duration          // before every request
	holdNext   bool                   // buffer the next answer after the commit and hold it
	committed  chan struct{}          // closed when the held request committed
	release    chan struct{}          // close to send the held answer
	byKey      map[string]int         // requests per Idempotency-Key
	byUser     map[string]int         // requests per X-Demo-User
	arrivals   map[string][]time.Time // per key
	answers    map[string][]int       // statuses per key
	inflight   int                    // requests arrived and not yet answered
	// effectsBy counts new effects (a 2xx answer that is not a replay) by
	// the request's X-Client-Fencing-Token: whose sends changed the server.
	effectsBy map[uint64]int
	// effectLog lists the new effects in the order the server made them.
	effectLog []noteEffect
}

// noteEffect is one new effect: its request's key, fencing token and body,
// when the request arrived, and when the server had committed it.
type noteEffect struct {
	Key              string
	Token            uint64
	Body             []byte
	Arrived, Applied time.Time
}

func newNoteCtl() *noteCtl {
	return &noteCtl{byKey: map[string]int{}, byUser: map[string]int{}, arrivals: map[string][]time.Time{}, answers: map[string][]int{}, effectsBy: map[uint64]int{}}
}

func (c *noteCtl) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/notes" {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		key := r.Header.Get("Idempotency-Key")
		c.mu.Lock()
		c.inflight++
		defer func() { c.mu.Lock(); c.inflight--; c.mu.Unlock() }()
		c.byKey[key]++
		c.byUser[r.Header.Get("X-Demo-User")]++
		arrived := time.Now()
		c.arrivals[key] = append(c.arrivals[key], arrived)
		delay := c.delay
		status := 0
		switch {
		case c.failText != "" && bytes.Contains(body, []byte(c.failText)):
			status = 500
		case c.fail500 > 0:
			c.fail500--
			status = 500
		case c.r429 > 0:
			c.r429--
			status = 429
			w.Header().Set("Retry-After", c.retryAfter)
		}
		hold := status == 0 && c.holdNext
		if hold {
			c.holdNext = false
		}
		committed, release := c.committed, c.release
		if status != 0 {
			c.answers[key] = append(c.answers[key], status)
		}
		c.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
		}
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		c.mu.Lock()
		c.answers[key] = append(c.answers[key], rec.Code)
		if rec.Code/100 == 2 && rec.Header().Get("Idempotent-Replayed") == "" {
			tok, _ := strconv.ParseUint(r.Header.Get("X-Client-Fencing-Token"), 10, 64)
			c.effectsBy[tok]++
			c.effectLog = append(c.effectLog, noteEffect{Key: key, Token: tok, Body: body, Arrived: arrived, Applied: time.Now()})
		}
		c.mu.Unlock()
		if hold {
			close(committed)
			select {
			case <-release:
			case <-r.Context().Done():
				return // the tab went away: the answer is lost
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// effectsAbove counts the new effects of sends whose fencing token is above
// tok: the work of owners newer than the one holding tok.
func (c *noteCtl) effectsAbove(tok uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for t, k := range c.effectsBy {
		if t > tok {
			n += k
		}
	}
	return n
}

func (c *noteCtl) set(fn func(c *noteCtl)) {
	c.mu.Lock()
	fn(c)
	c.mu.Unlock()
}

// keys returns how many idempotency keys were sent and the most requests one received.
func (c *noteCtl) keys() (n, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.byKey {
		n++
		if v > max {
			max = v
		}
	}
	return n, max
}

type obEnv struct {
	t   *testing.T
	b   *harness.Browser
	url string
	ctl *noteCtl
}

func setupOutbox(t *testing.T, k harness.Kind) *obEnv {
	return setupOutboxWith(t, k, harness.Options{})
}

// setupOutboxWith starts the server and a browser with o (Throttle and
// SharedWindow: hidden background tabs with throttled timers, as users'
// tabs are).
func setupOutboxWith(t *testing.T, k harness.Kind, o harness.Options) *obEnv {
	return setupOutboxMW(t, k, o, nil)
}

// setupOutboxMW is setupOutboxWith with mw, when not nil, in front of
// noteCtl's middleware (e.g. batchCtl's, for the batch route).
func setupOutboxMW(t *testing.T, k harness.Kind, o harness.Options, mw func(http.Handler) http.Handler) *obEnv {
	t.Helper()
	require.NoError(t, harness.CheckDist(distDir))
	ctl := newNoteCtl()
	chain := ctl.middleware
	if mw != nil {
		chain = func(h http.Handler) http.Handler { return mw(ctl.middleware(h)) }
	}
	srv, err := server.New(server.Config{
		DB:         filepath.Join(t.TempDir(), "e2e.db"),
		Dist:       distDir,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: chain,
	})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	o.Browser = k
	b, err := harness.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return &obEnv{t: t, b: b, url: ts.URL, ctl: ctl}
}

// tab opens the demo with the notes outbox and waits until it is ready.
func (e *obEnv) tab(queue, user string, extra url.Values) *harness.Tab {
	e.t.Helper()
	return e.tabWith(queue, user, extra, nil)
}

// tabWith is tab with before, when not nil, run in the blank tab before it
// loads the demo (e.g. harness.Tab.HideSyncManager).
func (e *obEnv) tabWith(queue, user string, extra url.Values, before func(*harness.Tab) error) *harness.Tab {
	e.t.Helper()
	// One POST /api/notes per record (batch=0), which noteCtl observes,
	// unless extra asks for the demo's default, batches (batch=1).
	q := url.Values{"scope": {queue}, "outbox": {queue}, "user": {user}, "batch": {"0"}}
	for k, v := range extra {
		q[k] = v
	}
	tab, err := e.b.NewTab()
	require.NoError(e.t, err)
	e.t.Cleanup(tab.Close)
	if before != nil {
		require.NoError(e.t, before(tab))
	}
	require.NoError(e.t, tab.Navigate(e.url+"/?"+q.Encode()))
	err = harness.Poll(context.Background(), "notes outbox ready", startTimeout, 20*time.Millisecond, func() (bool, error) {
		return harness.Eval[bool](tab, `(() => { const n = window.tabfenceNotes; if (n && n.error) throw new Error(n.error.name + ": " + n.error.message); return !!(n && n.ready); })()`)
	})
	require.NoError(e.t, err)
	return tab
}

func (e *obEnv) effects() int {
	e.t.Helper()
	resp, err := http.Get(e.url + "/api/effects")
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var v struct{ Effects int }
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&v))
	return v.Effects
}

func (e *obEnv) waitEffects(want int, timeout time.Duration) {
	e.t.Helper()
	err := harness.Poll(context.Background(), strconv.Itoa(want)+" effects", timeout, 25*time.Millisecond, func() (bool, error) {
		n := e.effects()
		if n > want {
			e.t.Fatalf("server counted %d effects, more than %d", n, want)
		}
		return n == want, nil
	})
	require.NoError(e.t, err)
}

type obStatus struct {
	Pending, Sending, Failed, DeadLetter, Conflict, Terminal, Acked int
	Leader                                                          bool
	OwnerID                                                         string `json:"ownerId"`
	LeaseToken                                                      float64
}

func status(t *testing.T, tab *harness.Tab) obStatus {
	t.Helper()
	return eval[obStatus](t, tab, `tabfenceNotes.outbox.status()`)
}

func waitStatus(t *testing.T, tab *harness.Tab, what string, timeout time.Duration, cond func(obStatus) bool) obStatus {
	t.Helper()
	var st obStatus
	err := harness.Poll(context.Background(), what, timeout, 30*time.Millisecond, func() (bool, error) {
		v, err := harness.Eval[obStatus](tab, `tabfenceNotes.outbox.status()`)
		st = v
		return err == nil && cond(v), err
	})
	require.NoError(t, err, "%v (last %+v)", err, st)
	return st
}

// offline cuts the tab's network (fetch fails) and fires offline/online.
func offline(t *testing.T, tab *harness.Tab, off bool) {
	t.Helper()
	require.NoError(t, tab.SetOffline(off))
}

// enqueue adds n notes from the tab, ids prefix-0..n-1; returns the record ids.
func enqueue(t *testing.T, tab *harness.Tab, prefix string, n int) []string {
	t.Helper()
	return enqueueIn(t, tab, prefix, n, "")
}

// enqueueIn is enqueue with every mutation in one ordered entity (when
// entity is not empty): they are sent one after another.
func enqueueIn(t *testing.T, tab *harness.Tab, prefix string, n int, entity string) []string {
	t.Helper()
	return eval[[]string](t, tab, `(async () => { const ids = [];
		for (let i = 0; i < `+strconv.Itoa(n)+`; i++) {
			const id = "`+prefix+`-" + i;
			const r = await tabfenceNotes.outbox.enqueue({operationType: "put-note", entityType: "note", entityId: "`+entity+`" || id, payload: {id, text: "text " + i}});
			ids.push(r.id);
		}
		return ids; })()`)
}

func leaderOf(t *testing.T, tabs []*harness.Tab) int {
	t.Helper()
	idx := -1
	err := harness.Poll(context.Background(), "a flushing tab", failoverTimeout, 10*time.Millisecond, func() (bool, error) {
		for i, tab := range tabs {
			if tab.Closed() {
				continue
			}
			ok, err := harness.Eval[bool](tab, `tabfenceNotes.outbox.status().then(s => s.leader)`)
			if err != nil {
				return false, err
			}
			if ok {
				idx = i
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err)
	return idx
}

// Three tabs enqueue 300 mutations while offline, go online, every tab
// triggers a flush: exactly 300 effects, each key sent once.
func TestOutbox300OfflineMutations(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		tabs := []*harness.Tab{e.tab(q, "alice", nil), e.tab(q, "alice", nil), e.tab(q, "alice", nil)}
		for _, tab := range tabs {
			offline(t, tab, true)
		}
		var wg sync.WaitGroup
		for i, tab := range tabs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				enqueue(t, tab, "t"+strconv.Itoa(i), 100)
			}()
		}
		wg.Wait()
		// Enqueues announce themselves, so a tab may be trying to flush right
		// now: judge the queue between attempts, when no record is in the
		// middle of a send. Being offline is not the records' fault: nothing
		// may be charged (no attempt, no backoff), all 300 wait as pending.
		st := waitStatus(t, tabs[0], "no send in progress", 10*time.Second, func(s obStatus) bool { return s.Sending == 0 })
		require.Equal(t, 300, st.Pending, "offline: %+v, effects %d", st, e.effects())
		require.Equal(t, 0, st.Failed, "offline: %+v, effects %d", st, e.effects())
		require.Equal(t, 0, e.effects(), "offline: %+v, effects %d", st, e.effects())
		start := time.Now()
		for _, tab := range tabs {
			offline(t, tab, false) // fires "online" in every tab: each one tries to flush
		}
		e.waitEffects(300, 30*time.Second)
		took := time.Since(start)
		for _, tab := range tabs {
			waitStatus(t, tab, "300 acked", 10*time.Second, func(s obStatus) bool { return s.Acked == 300 && s.Pending+s.Sending+s.Failed == 0 })
		}
		e.waitIdle() // nothing is left to send; a resend would already be on the wire
		n := e.effects()
		require.Equal(t, 300, n, "effects %d after settling", n)
		keys, max := e.ctl.keys()
		t.Logf("300 offline mutations delivered in %v after going online; %d keys, at most %d request(s) per key", took, keys, max)
		skips := 0
		for i, tab := range tabs {
			skips += eval[int](t, tab, `tabfenceNotes.events.filter(e => e.kind === "outbox.flush.skip_locked").length`)
			t.Logf("tab %d events: %s", i, eventSummary(t, tab))
			n := eval[int](t, tab, `tabfenceNotes.events.filter(e => e.kind === "outbox.record.retry" || e.kind === "outbox.dead_letter").length`)
			assert.Equal(t, 0, n, "tab %d: %d retries: an offline send was charged and backed off", i, n)
		}
		if skips == 0 {
			t.Log("no tab saw the lock taken (the flush was quicker than the other triggers)")
		}
	})
}

// The flushing tab is closed after the server committed a mutation but
// before the answer reached it: the other tabs take over, resend the same
// idempotency key, get the stored answer replayed: exactly once.
func TestOutboxResponseLost(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		tabs := []*harness.Tab{e.tab(q, "alice", nil), e.tab(q, "alice", nil), e.tab(q, "alice", nil)}
		for _, tab := range tabs {
			offline(t, tab, true)
		}
		enqueueIn(t, tabs[1], "n", 20, "list")
		committed, release := make(chan struct{}), make(chan struct{})
		defer close(release)
		e.ctl.set(func(c *noteCtl) { c.holdNext, c.committed, c.release = true, committed, release })
		for _, tab := range tabs {
			offline(t, tab, false)
		}
		select {
		case <-committed:
		case <-time.After(20 * time.Second):
			t.Fatal("no request reached the server")
		}
		owner := leaderOf(t, tabs)
		require.Equal(t, 1, e.effects(), "effects %d before the close", e.effects())
		start := time.Now()
		tabs[owner].Close()
		e.waitEffects(20, 30*time.Second)
		took := time.Since(start)
		other := tabs[(owner+1)%3]
		waitStatus(t, other, "20 acked", 10*time.Second, func(s obStatus) bool { return s.Acked == 20 && s.Pending+s.Sending+s.Failed == 0 })
		e.waitIdle()
		n := e.effects()
		require.Equal(t, 20, n, "effects %d, want exactly 20", n)
		_, max := e.ctl.keys()
		require.GreaterOrEqual(t, max, 2, "the lost answer's key was never resent (max %d request per key)", max)
		t.Logf("owner closed mid-answer: the queue finished %v later, exactly once (the lost key was sent %d times)", took, max)
	})
}

// The device goes offline in the middle of a flush (after the server
// committed a mutation, before its answer came back): the flush stops at the
// first send that fails, nothing is charged for the outage (no attempt, no
// backoff, no retry event), and when the network returns the queue drains
// at once, exactly once (the committed mutation's key is replayed).
func TestOutboxOfflineMidFlush(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		tab := e.tab(q, "alice", nil)
		offline(t, tab, true)
		enqueueIn(t, tab, "n", 20, "list")
		committed, release := make(chan struct{}), make(chan struct{})
		e.ctl.set(func(c *noteCtl) { c.holdNext, c.committed, c.release = true, committed, release })
		offline(t, tab, false)
		select {
		case <-committed:
		case <-time.After(20 * time.Second):
			close(release)
			t.Fatal("no request reached the server")
		}
		offline(t, tab, true)
		close(release) // the held answer, if the browser still takes it
		e.waitIdle()
		st := waitStatus(t, tab, "the flush stopped", 10*time.Second, func(s obStatus) bool { return s.Sending == 0 && !s.Leader })
		require.Equal(t, 0, st.Failed, "offline mid-flush: %+v (nothing may be charged for the outage)", st)
		require.Equal(t, 0, st.DeadLetter, "offline mid-flush: %+v (nothing may be charged for the outage)", st)
		require.Equal(t, 20, st.Pending+st.Acked, "offline mid-flush: %+v (nothing may be charged for the outage)", st)
		require.NotEqual(t, 0, st.Pending, "offline mid-flush: %+v (nothing may be charged for the outage)", st)
		n := e.effects()
		require.GreaterOrEqual(t, n, 1, "effects %d while going offline, want 1 or 2", n)
		require.LessOrEqual(t, n, 2, "effects %d while going offline, want 1 or 2", n)
		offline(t, tab, false)
		e.waitEffects(20, 30*time.Second)
		waitStatus(t, tab, "20 acked", 10*time.Second, func(s obStatus) bool { return s.Acked == 20 && s.Pending+s.Sending+s.Failed == 0 })
		e.waitIdle()
		n = e.effects()
		require.Equal(t, 20, n, "effects %d, want exactly 20", n)
		kinds := eventSummary(t, tab)
		n = eval[int](t, tab, `tabfenceNotes.events.filter(e => e.kind === "outbox.record.retry" || e.kind === "outbox.dead_letter").length`)
		require.Equal(t, 0, n, "%d retries: the outage was charged (%s)", n, kinds)
		require.NotEqual(t, 0, eval[int](t, tab, `tabfenceNotes.events.filter(e => e.kind === "outbox.offline").length`), "no outbox.offline event: the flush did not see the outage (%s)", kinds)
		t.Logf("events: %s", kinds)
	})
}

// A frozen owner (CDP Page.setWebLifecycleState frozen) keeps its Web Lock;
// the other tabs notice the stall, ask it, get no answer, steal and flush
// under a higher token; after it is resumed the old owner changes nothing.
func TestOutboxFrozenOwner(t *testing.T) {
	chromiumOnly(t, "freezes the flushing owner page: Page.setWebLifecycleState is CDP-only", func(t *testing.T, k harness.Kind) {
		frozenOwner(t, k, false)
	})
}

// The same with Chromium's background throttling: the tabs share a window,
// so all but the newest are hidden and their timers run about once a
// second; the watchdog's timers are among them.
func TestOutboxFrozenOwnerThrottled(t *testing.T) {
	chromiumOnly(t, "freezes the flushing owner page: Page.setWebLifecycleState is CDP-only", func(t *testing.T, k harness.Kind) {
		frozenOwner(t, k, true)
	})
}

func frozenOwner(t *testing.T, k harness.Kind, throttle bool) {
	e := setupOutboxWith(t, k, harness.Options{Throttle: throttle, SharedWindow: throttle})
	q := scope(t)
	const statusTimeout, stallAfter = 1500, 1000
	extra := url.Values{"statusTimeout": {strconv.Itoa(statusTimeout)}, "stallAfter": {strconv.Itoa(stallAfter)}}
	tabs := []*harness.Tab{e.tab(q, "alice", extra), e.tab(q, "alice", extra), e.tab(q, "alice", extra)}
	for _, tab := range tabs {
		offline(t, tab, true)
	}
	const n = 120
	enqueue(t, tabs[0], "f", n)
	e.ctl.set(func(c *noteCtl) { c.delay = 15 * time.Millisecond })
	for _, tab := range tabs {
		offline(t, tab, false)
	}
	require.NoError(t, harness.Poll(context.Background(), "20 effects", 20*time.Second, 5*time.Millisecond, func() (bool, error) { return e.effects() >= 20, nil }))
	owner := leaderOf(t, tabs)
	oldTok := eval[float64](t, tabs[owner], `tabfenceNotes.outbox.status().then(s => s.leaseToken)`)
	fenceTok := eval[float64](t, tabs[owner], `tabfenceNotes.outbox.status().then(s => s.fenceToken)`)
	require.Greater(t, fenceTok, float64(0), "the owner has no server fencing token (%v)", fenceTok)
	for i, tab := range tabs {
		if i != owner {
			eval[bool](t, tab, `(() => { const log = tabfenceNotes.channelLog = [];
				new BroadcastChannel(tabfenceNotes.outbox.lockName).onmessage = (e) => {
					const d = typeof e.data === "string" ? e.data : JSON.stringify(e.data);
					const k = /"kind":"([^"]*)"/.exec(d); log.push([k ? k[1] : d.slice(0, 40), Date.now()]); };
				return true; })()`)
		}
	}
	frozenAt := time.Now()
	if err := tabs[owner].SetFrozen(true); err != nil {
		t.Fatal(err)
	}
	// Requests the frozen tab sent before the freeze may still land: the
	// queue moves again when a newer owner (a higher server fencing token)
	// changes the server.
	e.waitIdle()
	base := e.effects()
	require.Less(t, base, n, "the owner finished before it froze (%d effects)", base)
	if err := harness.Poll(context.Background(), "the queue moving again", 15*time.Second, 10*time.Millisecond, func() (bool, error) {
		return e.ctl.effectsAbove(uint64(fenceTok)) > 0, nil
	}); err != nil {
		for i, tab := range tabs {
			if i != owner {
				t.Logf("tab %d: %s", i, eventSummary(t, tab))
				t.Logf("tab %d status: %+v", i, status(t, tab))
			}
		}
		t.Fatal(err)
	}
	moved := time.Since(frozenAt)
	for i, tab := range tabs {
		if i != owner {
			t.Logf("tab %d after the freeze (ms): %s", i, takeoverTimeline(t, tab, frozenAt))
		}
	}
	e.waitEffects(n, 30*time.Second)
	limit := time.Duration(stallAfter+statusTimeout)*time.Millisecond + 2*time.Second
	if throttle {
		limit += 2 * time.Second // two throttled timer steps (about 1 s each)
	}
	require.LessOrEqual(t, moved, limit, "queue moved again only after %v (limit %v)", moved, limit)
	// The new owner has acked everything: from now on nothing may change.
	// Snapshot the queue as stored, wake the old owner, wait until it has
	// noticed (it no longer leads and every flush it started has ended),
	// and compare: the store is the truth, not when a tab saw a commit.
	other := tabs[(owner+1)%3]
	waitStatus(t, other, "all acked", 10*time.Second, func(s obStatus) bool { return s.Acked == n })
	before := recordsSnapshot(t, other, q)
	if err := tabs[owner].SetFrozen(false); err != nil {
		t.Fatal(err)
	}
	tok := strconv.FormatFloat(oldTok, 'f', 0, 64)
	err := harness.Poll(context.Background(), "the old owner stood down", 10*time.Second, 20*time.Millisecond, func() (bool, error) {
		return harness.Eval[bool](tabs[owner], `tabfenceNotes.outbox.status().then(s => {
			return !s.leader && (`+flushesEndedJS+`)(tabfenceNotes.events.filter(e => e.leaseToken === `+tok+`)); })`)
	})
	require.NoError(t, err)
	after := recordsSnapshot(t, other, q)
	require.Equal(t, before, after, "the old owner changed the queue after it woke:\nbefore %s\nafter  %s", before, after)
	require.Equal(t, n, e.effects(), "effects")
	st := status(t, other)
	require.Greater(t, st.LeaseToken, oldTok, "lease token %v not above the frozen owner's %v", st.LeaseToken, oldTok)
	t.Logf("frozen owner (throttled background tabs: %v): queue moving again after %v (stall %dms + status timeout %dms)", throttle, moved, stallAfter, statusTimeout)
}

// Faults: a 500 storm then recovery; 429 with Retry-After respected; 400 not
// retried; dead letter after maxAttempts.
func TestOutboxFaults(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		tab := e.tab(q, "alice", url.Values{"backoffBase": {"50"}, "backoffCap": {"200"}, "maxAttempts": {"20"}})

		// 500 storm (20 answers over 10 records: fewer than any record's budget)
		e.ctl.set(func(c *noteCtl) { c.fail500 = 19 })
		enqueue(t, tab, "storm", 10)
		e.waitEffects(10, 30*time.Second)
		waitStatus(t, tab, "storm acked", 10*time.Second, func(s obStatus) bool { return s.Acked == 10 })
		e.ctl.mu.Lock()
		left := e.ctl.fail500
		e.ctl.mu.Unlock()
		require.Equal(t, 0, left, "storm not exhausted: %d left", left)

		// 429 with Retry-After: 2
		e.ctl.set(func(c *noteCtl) { c.r429, c.retryAfter = 1, "2" })
		ids := enqueue(t, tab, "slow", 1)
		e.waitEffects(11, 30*time.Second)
		var gap time.Duration
		e.ctl.mu.Lock()
		for _, ts := range e.ctl.arrivals {
			if len(ts) == 2 && ts[1].Sub(ts[0]) > gap {
				gap = ts[1].Sub(ts[0])
			}
		}
		e.ctl.mu.Unlock()
		require.GreaterOrEqual(t, gap, 2*time.Second, "resent %v after a 429 with Retry-After: 2", gap)
		t.Logf("429 Retry-After: 2 -> resent after %v (record %s)", gap, ids[0])

		// 400: not retried
		before := e.effects()
		eval[any](t, tab, `tabfenceNotes.outbox.enqueue({operationType: "put-note", entityType: "note", entityId: "bad", payload: "not json"})`)
		waitStatus(t, tab, "terminal", 10*time.Second, func(s obStatus) bool { return s.Terminal == 1 })
		e.waitIdle() // terminal: nothing is left to send; a resend would already be on the wire
		e.ctl.mu.Lock()
		bad := 0
		for k, st := range e.ctl.answers {
			if len(st) > 0 && st[0] == 400 {
				bad = e.ctl.byKey[k]
			}
		}
		e.ctl.mu.Unlock()
		require.Equal(t, 1, bad, "400 sent %d times, effects %d -> %d", bad, before, e.effects())
		require.Equal(t, before, e.effects(), "400 sent %d times, effects %d -> %d", bad, before, e.effects())

		// dead letter after maxAttempts (4), in another queue
		tab = e.tab(q+"-dl", "alice", url.Values{"backoffBase": {"50"}, "backoffCap": {"200"}, "maxAttempts": {"4"}})
		e.ctl.set(func(c *noteCtl) { c.failText = "doomed" })
		eval[any](t, tab, `tabfenceNotes.outbox.enqueue({operationType: "put-note", entityType: "note", entityId: "doomed", payload: {id: "doomed", text: "doomed"}})`)
		waitStatus(t, tab, "dead letter", 20*time.Second, func(s obStatus) bool { return s.DeadLetter == 1 })
		dl := eval[[]struct {
			Status   string
			Attempts int
		}](t, tab, `tabfenceNotes.outbox.deadLetters()`)
		var attempts []int
		for _, d := range dl {
			if d.Status == "dead_letter" {
				attempts = append(attempts, d.Attempts)
			}
		}
		require.Len(t, attempts, 1, "dead letters %+v", dl)
		require.Equal(t, 4, attempts[0], "dead letters %+v", dl)
	})
}

// Logout in one tab, login as another user in another: nothing of the first
// user is sent after the logout.
func TestOutboxSessionSwitch(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		a, b := e.tab(q, "alice", nil), e.tab(q, "alice", nil)
		offline(t, a, true)
		offline(t, b, true)
		enqueue(t, a, "alice", 10)
		eval[any](t, a, `tabfenceNotes.outbox.logout({purge: false})`)
		eval[any](t, b, `tabfenceNotes.outbox.login("bob")`)
		enqueue(t, b, "bob", 5)
		offline(t, a, false)
		offline(t, b, false)
		e.waitEffects(5, 20*time.Second)
		// Wait until both tabs are done: bob's five acked and every flush
		// either tab started has ended; whatever would have sent alice's
		// records has had its chance.
		waitStatus(t, b, "bob's five acked", 10*time.Second, func(s obStatus) bool { return s.Acked == 5 })
		for _, tab := range []*harness.Tab{a, b} {
			waitJS(t, tab, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		}
		e.waitIdle()
		e.ctl.mu.Lock()
		alice, bob := e.ctl.byUser["alice"], e.ctl.byUser["bob"]
		e.ctl.mu.Unlock()
		require.Equal(t, 0, alice, "requests alice %d bob %d, effects %d", alice, bob, e.effects())
		require.Equal(t, 5, bob, "requests alice %d bob %d, effects %d", alice, bob, e.effects())
		require.Equal(t, 5, e.effects(), "requests alice %d bob %d, effects %d", alice, bob, e.effects())
		st := status(t, b)
		// (a flush that was already running when the tab went offline may have
		// tried one of them: network error, not sent, waiting as failed)
		require.Equal(t, 10, st.Pending+st.Failed, "alice's records must wait, unsent: %+v", st)
	})
}

// eventSummary counts a tab's outbox events by kind and reason.
// takeoverTimeline lists, in ms after since, what one tab heard on the
// outbox channel (channelLog, installed by frozenOwner) and its first
// flush events: where a slow takeover spent its time.
func takeoverTimeline(t *testing.T, tab *harness.Tab, since time.Time) string {
	t.Helper()
	return eval[string](t, tab, `((t0) => {
		const out = (tabfenceNotes.channelLog || []).filter(([, at]) => at >= t0).map(([k, at]) => k + "@" + (at - t0));
		const seen = {};
		for (const e of tabfenceNotes.events) {
			if (e.at < t0 || seen[e.kind]) continue;
			seen[e.kind] = true;
			out.push(e.kind.replace("outbox.", "") + "@" + (e.at - t0));
		}
		return out.join(" ");
	})(`+strconv.FormatInt(since.UnixMilli(), 10)+`)`)
}

func eventSummary(t *testing.T, tab *harness.Tab) string {
	t.Helper()
	return eval[string](t, tab, `JSON.stringify(tabfenceNotes.events.reduce((m, e) => { const k = e.kind + (e.reason ? " " + e.reason.slice(0, 40) : ""); m[k] = (m[k] || 0) + 1; return m; }, {}))`)
}

// recordsSnapshot reads queue's records straight from IndexedDB (in tab),
// in key order, as JSON: what the store holds, whoever wrote it.
func recordsSnapshot(t *testing.T, tab *harness.Tab, queue string) string {
	t.Helper()
	name, _ := json.Marshal("tabfence-outbox:" + queue)
	return eval[string](t, tab, `new Promise((res, rej) => {
		const q = indexedDB.open(`+string(name)+`); q.onerror = () => rej(q.error);
		q.onsuccess = () => { const db = q.result; const r = db.transaction("records").objectStore("records").getAll();
			r.onerror = () => { db.close(); rej(r.error); };
			r.onsuccess = () => { db.close(); res(JSON.stringify(r.result)); }; }; })`)
}

// waitIdle waits until the server has answered every request it received.
func (e *obEnv) waitIdle() {
	e.t.Helper()
	require.NoError(e.t, harness.Poll(context.Background(), "no request in flight", 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		e.ctl.mu.Lock()
		defer e.ctl.mu.Unlock()
		return e.ctl.inflight == 0, nil
	}))
}

// flushesEndedJS is a JS function of an event list: every flush that
// started (a lease token's outbox.flush.start) has ended.
const flushesEndedJS = `((ev) => { const open = new Set();
	for (const e of ev) {
		if (e.kind === "outbox.flush.start") open.add(e.leaseToken);
		if (e.kind === "outbox.flush.end") open.delete(e.leaseToken);
	}
	return open.size === 0; })`

// An enqueue in a hidden, throttled tab (its timers run about once a
// second) gets its bookkeeping at once: its enqueue event, and so its
// status and flush hint, follow the commit within a task or two, not at
// the tab's next timer wake-up; online, it is sent and acked as promptly.
func TestOutboxEnqueueInThrottledTab(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutboxWith(t, k, harness.Options{Throttle: true, SharedWindow: true})
		bg := e.tab(scope(t), "alice", nil)
		e.tab(scope(t), "bob", nil) // the newest tab is the visible one
		require.Equal(t, "hidden", eval[string](t, bg, `document.visibilityState`), "the background tab is")
		// delays enqueues five records, one after the other, each once the
		// event of kind about the one before arrived: the ms from each
		// enqueue's commit (its promise) to that event.
		delays := func(kind, prefix string) []float64 {
			return eval[[]float64](t, bg, `(async (kind, prefix) => {
			const ob = tabfenceNotes.outbox, seen = new Map();
			ob.onEvent((e) => { if (e.kind === kind) seen.get(e.recordId)?.(performance.now()); });
			const delays = [];
			for (let i = 0; i < 5; i++) {
				let arrived;
				const ev = new Promise((r) => { arrived = r; });
				const r = await ob.enqueue({operationType: "put-note", entityType: "note", entityId: prefix + i, payload: {id: prefix + i, text: "x"}});
				const t0 = performance.now();
				seen.set(r.id, arrived);
				delays.push(await ev - t0);
			}
			return delays; })("`+kind+`", "`+prefix+`")`)
		}
		offline(t, bg, true) // the bookkeeping alone, not the flush
		events := delays("outbox.enqueue", "bg")
		t.Logf("commit -> enqueue event in a hidden tab (ms): %.0f", events)
		for _, d := range events {
			require.LessOrEqual(t, d, float64(400), "an enqueue event came %.0f ms after the commit (throttled timers fire about once a second): %.0f", d, events)
		}
		offline(t, bg, false)
		e.waitEffects(5, 10*time.Second)
		acks := delays("outbox.record.ack", "on")
		t.Logf("commit -> ack in a hidden tab (ms): %.0f", acks)
		for _, d := range acks {
			require.LessOrEqual(t, d, float64(500), "an enqueue in a hidden tab was acked %.0f ms after its commit: %.0f", d, acks)
		}
	})
}
