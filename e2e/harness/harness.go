// Package harness drives real browser tabs (Chromium over CDP, Firefox
// over WebDriver BiDi) for tabfence's end-to-end tests (package e2e) and
// browser benchmarks (cmd/bench/browserbench): one headless browser,
// several tabs in one browser context (so they share Web Locks,
// BroadcastChannel, IndexedDB and localStorage like a user's tabs), and the
// tabfence server in-process.
//
// Tests wait on conditions (Poll) with a deadline, never on fixed sleeps:
// failover takes 20–80 ms on an idle machine and seconds on a loaded one.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Options configure Start.
type Options struct {
	// Browser is the engine to start; the zero value is KindChromium.
	Browser Kind
	// Throttle keeps the browser's default throttling of background tabs
	// (timers about once a second). Users' hidden tabs are throttled, so one
	// test keeps it; the others turn it off for determinism.
	Throttle bool
	// SharedWindow opens tabs as tabs of one window, as a user does: only
	// the newest is visible, the others are hidden (and, with Throttle,
	// throttled). By default each tab gets its own window, so every tab is
	// visible.
	SharedWindow bool
	// ExecPath overrides the engine's binary (Chromium, Firefox).
	ExecPath string
	// Features is passed as --enable-features (e.g. a Chromium policy's
	// parameters a test needs shorter than a user waits). Chromium only.
	Features string
	// Bare turns off, in every tab, the DevTools domains chromedp enables
	// on attaching that a test of ours does not use: Network, DOM and CSS.
	// With them on, Chromium reports every request and every DOM change
	// to the client, which costs the page's processes CPU a user's browser
	// does not spend (measured: a sequential fetch loop to loopback runs
	// about a quarter slower). Benchmarks set it; e2e tests that emulate
	// the network need the Network domain and leave it off. Chromium only
	// (Firefox ignores it).
	Bare bool
}

// Browser is one headless browser with its own temporary profile.
type Browser struct {
	eng          engine
	kind         Kind
	sharedWindow bool
}

// Start launches the browser o.Browser names. Close it when done.
func Start(ctx context.Context, o Options) (*Browser, error) {
	if o.Browser == "" {
		o.Browser = KindChromium
	}
	var eng engine
	var err error
	switch o.Browser {
	case KindChromium:
		eng, err = startCDP(ctx, o)
	case KindFirefox:
		if o.Features != "" {
			return nil, errors.New("harness: Options.Features is Chromium's --enable-features; Firefox has none")
		}
		eng, err = startBiDi(ctx, o)
	default:
		return nil, errors.New("harness: unknown browser " + strconv.Quote(string(o.Browser)))
	}
	if err != nil {
		return nil, err
	}
	return &Browser{eng: eng, kind: o.Browser, sharedWindow: o.SharedWindow}, nil
}

// Kind is the browser's engine.
func (b *Browser) Kind() Kind { return b.kind }

// CDP is the chromedp context of the browser's first tab (about:blank, which
// no test closes), for CDP calls the harness has no method for; on a
// browser that is not Chromium it is ErrChromiumOnly.
func (b *Browser) CDP() (context.Context, error) {
	if e, ok := b.eng.(*cdpEngine); ok {
		return e.ctx, nil
	}
	return nil, ErrChromiumOnly
}

// Close closes every tab and stops the browser.
func (b *Browser) Close() { b.eng.close() }

// Tab is one page of the browser.
type Tab struct {
	p      pageDriver
	kind   Kind
	closed bool
}

// NewTab opens a blank tab in the browser's context.
func (b *Browser) NewTab() (*Tab, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := b.eng.newPage(ctx, !b.sharedWindow)
	if err != nil {
		return nil, err
	}
	return &Tab{p: p, kind: b.kind}, nil
}

// Open opens a tab at url and waits for its load event.
func (b *Browser) Open(url string) (*Tab, error) {
	t, err := b.NewTab()
	if err != nil {
		return nil, err
	}
	if err := t.Navigate(url); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Kind is the engine of the tab's browser.
func (t *Tab) Kind() Kind { return t.kind }

// CDP is the tab's chromedp context, for chromedp.Run and chromedp.Call
// (CDP-only features); on a browser that is not Chromium it is
// ErrChromiumOnly.
func (t *Tab) CDP() (context.Context, error) {
	if p, ok := t.p.(*cdpPage); ok {
		return p.ctx, nil
	}
	return nil, ErrChromiumOnly
}

// navTimeout bounds a navigation, a reload and a click.
const navTimeout = 30 * time.Second

// call runs f with a context bounded by timeout.
func call(timeout time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return f(ctx)
}

// Navigate loads url in the tab and waits for its load event.
func (t *Tab) Navigate(url string) error {
	return call(navTimeout, func(ctx context.Context) error { return t.p.navigate(ctx, url) })
}

// Reload reloads the page and waits for its load event.
func (t *Tab) Reload() error {
	return call(navTimeout, t.p.reload)
}

// SetOffline emulates an offline network for this tab (fetches fail,
// navigator.onLine is false, the offline event fires) or ends it.
func (t *Tab) SetOffline(offline bool) error {
	return call(EvalTimeout, func(ctx context.Context) error { return t.p.setOffline(ctx, offline) })
}

// BypassCache makes every request of the tab go to the server, as a first
// visit does (bypass), or restores the default.
func (t *Tab) BypassCache(bypass bool) error {
	return call(EvalTimeout, func(ctx context.Context) error { return t.p.bypassCache(ctx, bypass) })
}

// AddInitScript runs source in every document the tab loads from now on,
// before the document's own scripts. Call it before Navigate. Firefox runs
// source as a function body, so its top-level var and function
// declarations are local there (Chromium makes them globals): assign to
// window.* for a global both engines see.
func (t *Tab) AddInitScript(source string) error {
	return call(EvalTimeout, func(ctx context.Context) error { return t.p.addInitScript(ctx, source) })
}

// Click clicks (press and release of a real pointer) the first element
// matching the CSS selector, waiting (as chromedp.Click does) until one
// exists and has a box.
func (t *Tab) Click(selector string) error {
	return call(EvalTimeout, func(ctx context.Context) error { return t.p.click(ctx, selector) })
}

// Screenshot is a PNG of the whole document.
func (t *Tab) Screenshot() ([]byte, error) {
	var png []byte
	err := call(navTimeout, func(ctx context.Context) error {
		var err error
		png, err = t.p.screenshot(ctx)
		return err
	})
	return png, err
}

// Close closes the tab (the browser then releases its Web Locks and
// withdraws its queued requests). It returns once the page is gone.
func (t *Tab) Close() {
	if t.closed {
		return
	}
	t.closed = true
	_ = call(10*time.Second, t.p.close)
}

// Closed reports whether Close was called.
func (t *Tab) Closed() bool { return t.closed }

// EvalTimeout bounds one Eval.
const EvalTimeout = 20 * time.Second

// ErrJSNull is Eval's error for a script whose value is null or undefined
// when T cannot hold nil: a zero T would read as a real answer.
var ErrJSNull = errors.New("harness: the script's value is null or undefined")

// Eval evaluates a script in the tab (statements allowed: its value is the
// last expression's), awaits it if it is a promise, and decodes its JSON
// value into T. A thrown exception is an *EvalError.
func Eval[T any](t *Tab, script string) (T, error) { return EvalFor[T](t, EvalTimeout, script) }

// EvalFor is Eval bounded by timeout instead of EvalTimeout (a benchmark's
// long loop).
func EvalFor[T any](t *Tab, timeout time.Duration, script string) (T, error) {
	var v T
	var raw []byte
	err := call(timeout, func(ctx context.Context) error {
		var err error
		raw, err = t.p.evaluate(ctx, script)
		return err
	})
	if err != nil {
		return v, err
	}
	return decode[T](raw)
}

// decode unmarshals a script's JSON value; null into a T that cannot be nil
// is ErrJSNull.
func decode[T any](raw []byte) (T, error) {
	var v T
	if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
		switch reflect.TypeFor[T]().Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Chan, reflect.Func:
			return v, nil
		default:
			return v, ErrJSNull
		}
	}
	err := json.Unmarshal(raw, &v)
	return v, err
}

// Poll calls cond every interval until it returns true, returns an error,
// or timeout passes (then the error says what was awaited).
func Poll(ctx context.Context, what string, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			msg := "harness: timed out after " + timeout.String() + " waiting for " + what
			if last != nil {
				msg += " (last error: " + last.Error() + ")"
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// NowMs is the wall clock in milliseconds, comparable with
// performance.timeOrigin + performance.now() in a page on this machine.
func NowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }
