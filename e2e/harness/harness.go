// Package harness drives real Chromium tabs for tabfence's end-to-end tests
// (package e2e) and browser benchmarks (cmd/bench/browserbench): one
// headless browser, several tabs in one browser context (so they share Web
// Locks, BroadcastChannel, IndexedDB and localStorage like a user's tabs),
// and the tabfence server in-process.
//
// Tests wait on conditions (Poll) with a deadline, never on fixed sleeps:
// failover takes 20–80 ms on an idle machine and seconds on a loaded one.
package harness

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Chromium is the browser the harness starts.
const Chromium = "/usr/bin/chromium"

// Options configure Start.
type Options struct {
	// Throttle keeps Chromium's default throttling of background tabs
	// (timers about once a second). Users' hidden tabs are throttled, so one
	// test keeps it; the others turn it off for determinism.
	Throttle bool
	// SharedWindow opens tabs as tabs of one window, as a user does: only
	// the newest is visible, the others are hidden (and, with Throttle,
	// throttled). By default chromedp gives each tab its own window, so every
	// tab is visible.
	SharedWindow bool
	// ExecPath overrides Chromium.
	ExecPath string
	// Features is passed as --enable-features (e.g. a Chromium policy's
	// parameters a test needs shorter than a user waits).
	Features string
	// Bare turns off, in every tab, the DevTools domains chromedp enables
	// on attaching that a test of ours does not use: Network, DOM and CSS.
	// With them on, Chromium reports every request and every DOM change
	// to the client, which costs the page's processes CPU a user's browser
	// does not spend (measured: a sequential fetch loop to loopback runs
	// about a quarter slower). Benchmarks set it; e2e tests that emulate
	// the network need the Network domain and leave it off.
	Bare bool
}

// Browser is one headless Chromium with its own temporary profile.
type Browser struct {
	ctx          context.Context // the browser's first tab; cancelling it closes the browser
	cancel       context.CancelFunc
	allocCancel  context.CancelFunc
	sharedWindow bool
	bare         bool
}

// Start launches the browser. Close it when done.
func Start(ctx context.Context, o Options) (*Browser, error) {
	path := o.ExecPath
	if path == "" {
		path = Chromium
	}
	if _, err := os.Stat(path); err != nil {
		return nil, errors.New("harness: no browser at " + path + " (make chromium installs Debian's)")
	}
	// Built from scratch, not from chromedp.DefaultExecAllocatorOptions,
	// which always disables background throttling.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
	}
	if !o.Throttle {
		opts = append(opts,
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			chromedp.Flag("disable-backgrounding-occluded-windows", true),
		)
	}
	if o.Features != "" {
		opts = append(opts, chromedp.Flag("enable-features", o.Features))
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	if _, err := chromedp.Run(bctx, chromedp.Navigate("about:blank")); err != nil {
		bcancel()
		acancel()
		return nil, errors.New("harness: starting chromium: " + err.Error())
	}
	return &Browser{ctx: bctx, cancel: bcancel, allocCancel: acancel, sharedWindow: o.SharedWindow, bare: o.Bare}, nil
}

// Close closes every tab and stops the browser.
func (b *Browser) Close() {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	_ = chromedp.Cancel(ctx)
	b.cancel()
	b.allocCancel()
}

// Tab is one page of the browser.
type Tab struct {
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
}

// NewTab opens a blank tab in the browser's context.
func (b *Browser) NewTab() (*Tab, error) {
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewWindow(!b.sharedWindow))
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		cancel()
		return nil, err
	}
	if b.bare {
		for _, c := range []cdp.Command[cdp.Empty, cdp.Empty]{network.Disable, dom.Disable, css.Disable} {
			if _, err := chromedp.Call(ctx, c, cdp.Empty{}); err != nil {
				cancel()
				return nil, errors.New("harness: bare tab: " + err.Error())
			}
		}
	}
	return &Tab{ctx: ctx, cancel: cancel}, nil
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

// Ctx is the tab's chromedp context, for chromedp.Run and chromedp.Call.
func (t *Tab) Ctx() context.Context { return t.ctx }

// Navigate loads url in the tab and waits for its load event.
func (t *Tab) Navigate(url string) error {
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Navigate(url))
	return err
}

// Reload reloads the page and waits for its load event.
func (t *Tab) Reload() error {
	ctx, cancel := context.WithTimeout(t.ctx, 30*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Reload())
	return err
}

// Close closes the tab (the browser then releases its Web Locks and
// withdraws its queued requests). It returns once the target is gone.
func (t *Tab) Close() {
	if t.closed {
		return
	}
	t.closed = true
	t.cancel()
}

// Closed reports whether Close was called.
func (t *Tab) Closed() bool { return t.closed }

// EvalTimeout bounds one Eval.
const EvalTimeout = 20 * time.Second

// Eval evaluates a JavaScript expression in the tab, awaits it if it is a
// promise, and decodes its JSON value into T.
func Eval[T any](t *Tab, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(t.ctx, EvalTimeout)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
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
