//go:build e2e

package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bidiServer serves the pages the Firefox engine tests load; hits counts
// requests per path.
type bidiServer struct {
	*httptest.Server
	hits map[string]*atomic.Int64
}

func newBiDiServer(t *testing.T) *bidiServer {
	s := &bidiServer{hits: map[string]*atomic.Int64{}}
	mux := http.NewServeMux()
	page := func(path, body string, header map[string]string) {
		n := &atomic.Int64{}
		s.hits[path] = n
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			for k, v := range header {
				w.Header().Set(k, v)
			}
			_, _ = w.Write([]byte(body))
		})
	}
	html := map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store"}
	page("/", `<!doctype html><title>blank</title>`, html)
	page("/init", `<!doctype html><script>
		window.pageSawInit = window.initRan === 1;
		window.pageRan = true;
	</script>`, html)
	page("/button", `<!doctype html><body style="margin:0">
		<div style="height:3000px"></div>
		<button id="b" style="width:80px;height:30px">press</button>
		<script>
			window.clicks = [];
			document.getElementById("b").addEventListener("click", e => clicks.push(e.isTrusted));
		</script></body>`, html)
	page("/late", `<!doctype html><body>
		<button id="hidden" style="display:none">later</button>
		<script>
			window.clicks = [];
			const h = document.getElementById("hidden");
			h.addEventListener("click", e => clicks.push("hidden"));
			setTimeout(() => {
				const b = document.createElement("button");
				b.id = "late";
				b.textContent = "late";
				b.addEventListener("click", e => clicks.push("late"));
				document.body.append(b);
				h.style.display = "";
			}, 300);
		</script></body>`, html)
	page("/cacheable", `cached`, map[string]string{"Content-Type": "text/plain", "Cache-Control": "public, max-age=3600"})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// startFirefox starts the Firefox engine for one test and closes it after.
func startFirefox(t *testing.T, o Options) *bidiEngine {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	t0 := time.Now()
	e, err := startBiDi(ctx, o)
	require.NoError(t, err)
	t.Logf("firefox started in %v", time.Since(t0).Round(time.Millisecond))
	t.Cleanup(e.close)
	return e.(*bidiEngine)
}

// openPage opens a page (in a window of its own unless tab) at url.
func openPage(t *testing.T, e *bidiEngine, window bool, url string) pageDriver {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	p, err := e.newPage(ctx, window)
	require.NoError(t, err)
	require.NoError(t, p.navigate(ctx, url))
	return p
}

// evalIn evaluates script in p and decodes its JSON into a T.
func evalIn[T any](t *testing.T, p pageDriver, script string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), EvalTimeout)
	defer cancel()
	raw, err := p.evaluate(ctx, script)
	require.NoError(t, err, script)
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), string(raw))
	return v
}

// within bounds one driver call in a test.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func pollTrue(t *testing.T, p pageDriver, what, script string) {
	t.Helper()
	require.NoError(t, Poll(t.Context(), what, 15*time.Second, 20*time.Millisecond, func() (bool, error) {
		ctx, cancel := context.WithTimeout(t.Context(), EvalTimeout)
		defer cancel()
		raw, err := p.evaluate(ctx, script)
		return string(raw) == "true", err
	}))
}

// Two pages of the one browser share BroadcastChannel and Web Locks, and
// closing the lock holder's page hands the lock to the waiting page: close
// really discards the page.
func TestBiDiPagesShareLocksAndChannels(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	a := openPage(t, e, true, srv.URL+"/")
	b := openPage(t, e, true, srv.URL+"/")
	for _, p := range []pageDriver{a, b} {
		require.Equal(t, "visible", evalIn[string](t, p, `document.visibilityState`), "a page in a window of its own")
	}

	evalIn[any](t, a, `window.got = []; new BroadcastChannel("c").onmessage = m => got.push(m.data); null`)
	evalIn[any](t, b, `new BroadcastChannel("c").postMessage("hello"); null`)
	pollTrue(t, a, "the broadcast", `got.length === 1 && got[0] === "hello"`)

	evalIn[any](t, a, `window.held = false;
		navigator.locks.request("L", () => { held = true; return new Promise(() => {}); }); null`)
	pollTrue(t, a, "page a holding the lock", `held`)
	evalIn[any](t, b, `window.held = false;
		navigator.locks.request("L", () => { held = true; return new Promise(() => {}); }); null`)
	pollTrue(t, b, "page b's request queued", `navigator.locks.query().then(s => s.pending.length === 1 && s.held.length === 1)`)
	require.False(t, evalIn[bool](t, b, `held`))

	require.NoError(t, a.close(within(t, 20*time.Second)))
	pollTrue(t, b, "page b granted the lock after page a closed", `held`)
}

// evaluate returns the JSON JSON.stringify gives for the same value in
// the page, for every kind of remote value BiDi sends.
func TestBiDiEvaluateMatchesJSONStringify(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/")
	exprs := []string{
		`1`, `1.5`, `-0`, `NaN`, `Infinity`, `-Infinity`, `1e21`, `2**53 + 2`, `5e-324`,
		`"text"`, `"é\n\t\"quoted\" <b>&</b> \u2028 \u0001"`, `""`,
		`true`, `false`, `null`, `undefined`, `(() => 1)`, `Symbol("s")`,
		`[]`, `({})`, `[1, "a", null, undefined, () => 1, Symbol(), NaN, -0, [2, [3]]]`,
		`({a: 1, b: undefined, c: () => 1, d: "x", e: Symbol(), f: null, g: {h: [1, {i: 2}]}})`,
		`({b: 1, 2: "two", a: 3, 1: "one", "-1": 4})`,
		`(() => { let o = {leaf: true}; for (let i = 0; i < 30; i++) o = {i, o, a: [i, [i]]}; return o; })()`,
		`(() => { const o = {x: 1}; return [o, o, {o, p: [o]}]; })()`,
		`new Date(0)`, `[new Date(1700000000123)]`, `/re+/gi`, `new Map([[1, 2], ["a", {b: 3}]])`,
		`new Set([1, 2])`, `(() => { const o = {}; return [new Map([[1, o]]), o]; })()`,
		`(() => { const o = {a: [1]}, k = {k: 1}; return [new Set([[o]]), o, new Map([[k, 1]]), {k}]; })()`,
		`new Error("e")`, `({err: new TypeError("t")})`, `document.body`,
		`document.querySelectorAll("title")`, `new WeakMap()`, `new ArrayBuffer(4)`,
		`Promise.resolve({resolved: [1, 2]})`,
	}
	for _, expr := range exprs {
		ctx := within(t, EvalTimeout)
		got, err := p.evaluate(ctx, expr)
		require.NoError(t, err, expr)
		want := evalIn[string](t, p, `(async () => {
			const s = JSON.stringify(await (`+expr+`));
			return s === undefined ? "null" : s;
		})()`)
		require.Equal(t, want, string(got), expr)
	}
	for _, expr := range []string{`10n`, `[1n]`, `(() => { const o = {}; o.self = o; return o; })()`} {
		_, err := p.evaluate(within(t, EvalTimeout), expr)
		require.ErrorIs(t, err, ErrNotJSON, expr)
		_, err = p.evaluate(within(t, EvalTimeout), `JSON.stringify(`+expr+`)`)
		var ee *EvalError
		require.ErrorAs(t, err, &ee, "JSON.stringify rejects %s too", expr)
	}
	// Firefox 153 cannot serialize an invalid Date (JSON.stringify gives
	// null): the command fails in the browser, and says so.
	var be *BiDiError
	_, err := p.evaluate(within(t, EvalTimeout), `new Date(NaN)`)
	require.ErrorAs(t, err, &be)
	require.Contains(t, be.Message, "invalid date")
	// A script of statements has its last expression's value.
	require.Equal(t, 8, evalIn[int](t, p, `let z = 4; z * 2`))
	require.Equal(t, []int{1, 2}, evalIn[[]int](t, p, `var arr = [1]; arr.push(2); arr`))
}

// A thrown error and a rejected promise are *EvalError with the message;
// a slow promise is awaited; a promise that never settles gives way to
// ctx promptly.
func TestBiDiEvaluateErrorsAndPromises(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/")
	var ee *EvalError
	_, err := p.evaluate(within(t, EvalTimeout), `throw new Error("boom")`)
	require.ErrorAs(t, err, &ee)
	require.Contains(t, ee.Message, "boom")
	t.Logf("thrown: %q", ee.Message)
	_, err = p.evaluate(within(t, EvalTimeout), `Promise.reject(new RangeError("nope"))`)
	require.ErrorAs(t, err, &ee)
	require.Contains(t, ee.Message, "nope")
	t.Logf("rejected: %q", ee.Message)

	t0 := time.Now()
	v := evalIn[int](t, p, `new Promise(r => setTimeout(() => r(42), 300))`)
	require.Equal(t, 42, v)
	require.GreaterOrEqual(t, time.Since(t0), 290*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	_, err = p.evaluate(ctx, `new Promise(() => {})`)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(t0), 2*time.Second)
	require.Equal(t, 3, evalIn[int](t, p, `1 + 2`), "the page still answers")
}

// setOffline takes this page, and only it, offline and back.
func TestBiDiSetOffline(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/")
	other := openPage(t, e, true, srv.URL+"/")
	fetchOK := `fetch("/cacheable", {cache: "no-store"}).then(() => true, () => false)`
	evalIn[any](t, p, `window.events = []; addEventListener("offline", () => events.push("offline"));
		addEventListener("online", () => events.push("online")); null`)

	require.NoError(t, p.setOffline(within(t, 20*time.Second), true))
	pollTrue(t, p, "navigator.onLine false", `navigator.onLine === false`)
	require.False(t, evalIn[bool](t, p, fetchOK), "a fetch offline fails")
	require.True(t, evalIn[bool](t, other, `navigator.onLine`), "the other page stays online")
	require.True(t, evalIn[bool](t, other, fetchOK))

	require.NoError(t, p.setOffline(within(t, 20*time.Second), false))
	pollTrue(t, p, "navigator.onLine true", `navigator.onLine === true`)
	require.True(t, evalIn[bool](t, p, fetchOK), "a fetch online again succeeds")
	pollTrue(t, p, "the offline and online events", `events.join() === "offline,online"`)
}

// bypassCache sends a cached resource's next load to the server.
func TestBiDiBypassCache(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/")
	hits := srv.hits["/cacheable"]
	load := `fetch("/cacheable").then(r => r.text())`
	require.Equal(t, "cached", evalIn[string](t, p, load))
	require.Equal(t, "cached", evalIn[string](t, p, load))
	require.EqualValues(t, 1, hits.Load(), "the second load comes from the cache")

	require.NoError(t, p.bypassCache(within(t, 20*time.Second), true))
	require.Equal(t, "cached", evalIn[string](t, p, load))
	require.EqualValues(t, 2, hits.Load(), "bypassing, the load hits the server")
	require.NoError(t, p.bypassCache(within(t, 20*time.Second), false))
}

// addInitScript runs in the next document before its own scripts.
func TestBiDiAddInitScript(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/")
	require.NoError(t, p.addInitScript(within(t, 20*time.Second),
		`window.initRan = (window.initRan || 0) + 1; window.initBeforePage = !window.pageRan;`))
	require.Nil(t, evalIn[any](t, p, `window.initRan`), "not in the current document")
	require.NoError(t, p.navigate(within(t, 30*time.Second), srv.URL+"/init"))
	require.True(t, evalIn[bool](t, p, `initBeforePage && pageSawInit && initRan === 1`))
}

// click is a trusted click that reaches the button's handler, scrolled
// into view first; screenshot is a PNG; reload loads the document again.
func TestBiDiClickScreenshotReload(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/button")
	require.NoError(t, p.click(within(t, 20*time.Second), "#b"))
	pollTrue(t, p, "the trusted click", `clicks.length === 1 && clicks[0] === true`)
	require.ErrorIs(t, p.click(within(t, time.Second), "#none"), ErrNoElement)

	// click waits for an element that does not exist yet, or has no box.
	require.NoError(t, p.navigate(within(t, 30*time.Second), srv.URL+"/late"))
	require.NoError(t, p.click(within(t, 20*time.Second), "#hidden"))
	require.NoError(t, p.click(within(t, 20*time.Second), "#late"))
	pollTrue(t, p, "both clicks", `clicks.join() === "hidden,late"`)
	require.NoError(t, p.navigate(within(t, 30*time.Second), srv.URL+"/button"))

	png, err := p.screenshot(within(t, 20*time.Second))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG")

	before := srv.hits["/button"].Load()
	evalIn[any](t, p, `window.mark = 1; null`)
	require.NoError(t, p.reload(within(t, 30*time.Second)))
	require.Nil(t, evalIn[any](t, p, `window.mark`))
	require.Equal(t, before+1, srv.hits["/button"].Load())
}

// A killed browser fails calls with ErrBrowserGone instead of hanging.
func TestBiDiKilledBrowserFailsCalls(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/")
	ctx := within(t, 30*time.Second)
	done := make(chan error, 1)
	go func() { _, err := p.evaluate(ctx, `new Promise(() => {})`); done <- err }()
	require.NoError(t, e.proc.cmd.Process.Kill())
	t0 := time.Now()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrBrowserGone)
	case <-time.After(10 * time.Second):
		t.Fatal("a pending evaluate still waits 10 s after the browser was killed")
	}
	t.Logf("pending call failed %v after the kill", time.Since(t0).Round(time.Millisecond))
	_, err := p.evaluate(ctx, `1`)
	require.ErrorIs(t, err, ErrBrowserGone)
	_, err = e.newPage(ctx, true)
	require.True(t, errors.Is(err, ErrBrowserGone), "newPage: %v", err)
}

// chainedTimers runs n chained setTimeout(…, 10) and returns their
// total time in ms (performance.now has 1 ms resolution in Firefox).
func chainedTimers(n int) string {
	return `new Promise(r => {
		const t0 = performance.now(); let n = 0;
		const tick = () => ++n === ` + strconv.Itoa(n) + ` ? r(performance.now() - t0) : setTimeout(tick, 10);
		setTimeout(tick, 10);
	})`
}

// hiddenTab opens two tabs of one window and returns the first, hidden
// behind the second.
func hiddenTab(t *testing.T, o Options) pageDriver {
	e, srv := startFirefox(t, o), newBiDiServer(t)
	hidden := openPage(t, e, false, srv.URL+"/")
	front := openPage(t, e, false, srv.URL+"/")
	require.Equal(t, "visible", evalIn[string](t, front, `document.visibilityState`))
	require.Equal(t, "hidden", evalIn[string](t, hidden, `document.visibilityState`))
	return hidden
}

// With Throttle false, a hidden tab's short timers run at their delay:
// five chained setTimeout(…, 10) take well under the 1 s each Firefox
// clamps a background tab's timers to by default.
func TestBiDiUnthrottledHiddenTab(t *testing.T) {
	ms := evalIn[float64](t, hiddenTab(t, Options{}), chainedTimers(5))
	t.Logf("five chained 10 ms timers in the hidden tab: %.0f ms", ms)
	require.GreaterOrEqual(t, ms, 49.0)
	require.Less(t, ms, 1000.0)
}

// With Throttle true, Firefox's default clamp holds: two chained 10 ms
// timers in a hidden tab take over a second.
func TestBiDiThrottledHiddenTab(t *testing.T) {
	ms := evalIn[float64](t, hiddenTab(t, Options{Throttle: true}), chainedTimers(2))
	t.Logf("two chained 10 ms timers in the throttled hidden tab: %.0f ms", ms)
	require.Greater(t, ms, 1000.0)
}

// Calls are multiplexed: a page's pending evaluate does not hold up
// another page's navigate and evaluate.
func TestBiDiCallsInFlightTogether(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	a := openPage(t, e, true, srv.URL+"/")
	b := openPage(t, e, true, srv.URL+"/")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := a.evaluate(ctx, `new Promise(() => {})`); done <- err }()
	require.NoError(t, b.navigate(within(t, 30*time.Second), srv.URL+"/init"))
	require.True(t, evalIn[bool](t, b, `pageRan`))
	require.Equal(t, 2, evalIn[int](t, a, `1 + 1`), "the same page answers beside its pending call")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// A call whose ctx is spent, or ends while its message is being written,
// fails alone: the socket and every other page's calls live on.
func TestBiDiSpentDeadlineFailsOnlyItsCall(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	a := openPage(t, e, true, srv.URL+"/")
	b := openPage(t, e, true, srv.URL+"/")
	spent, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := a.evaluate(spent, `1`)
	require.ErrorIs(t, err, context.Canceled)
	// A big message takes a while to write: deadlines of a few
	// microseconds end during the write, not before it.
	big := `"` + strings.Repeat("x", 4<<20) + `".length`
	for i := range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i*50)*time.Microsecond)
		_, err := a.evaluate(ctx, big)
		cancel()
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
	}
	require.Equal(t, 2, evalIn[int](t, b, `1 + 1`), "the other page's calls still work")
	require.Equal(t, 4<<20, evalIn[int](t, a, big), "and the page's own")
}

// A call on a socket that has closed (before the read loop has noticed)
// fails with ErrBrowserGone, as every call after the browser went does.
func TestBiDiClosedSocketIsBrowserGone(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	p := openPage(t, e, true, srv.URL+"/")
	require.NoError(t, e.conn.ws.CloseNow())
	_, err := p.evaluate(within(t, EvalTimeout), `1`)
	require.ErrorIs(t, err, ErrBrowserGone)
}

// A browser that never prints its BiDi address fails the start at the
// start timeout, even under a ctx without a deadline.
func TestBiDiStartTimesOut(t *testing.T) {
	silent := t.TempDir() + "/silent-firefox"
	require.NoError(t, os.WriteFile(silent, []byte("#!/bin/sh\nexec sleep 600\n"), 0o700))
	defer func(d time.Duration) { firefoxStartTimeout = d }(firefoxStartTimeout)
	firefoxStartTimeout = time.Second
	t0 := time.Now()
	_, err := startBiDi(context.Background(), Options{ExecPath: silent})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(t0), 15*time.Second)
}
