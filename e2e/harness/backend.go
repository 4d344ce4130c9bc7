package harness

import (
	"context"
	"errors"
)

// Kind names a browser engine the harness can drive.
type Kind string

const (
	// KindChromium is Debian's chromium, driven over the Chrome DevTools
	// Protocol (chromedp).
	KindChromium Kind = "chromium"
	// KindFirefox is Debian's firefox-esr, driven over WebDriver BiDi
	// (Firefox speaks no CDP).
	KindFirefox Kind = "firefox"
)

// ErrChromiumOnly is returned by a harness call that needs a CDP-only
// feature (freezing a page, heap usage, Service Worker sync dispatch) on
// a browser that is not Chromium.
var ErrChromiumOnly = errors.New("harness: needs Chromium (a CDP-only feature)")

// engine is one running browser as the harness drives it: cdp.go
// (Chromium) and bidi*.go (Firefox) implement it. Browser and Tab are the
// only types tests see; they hold an engine and its pages.
type engine interface {
	// newPage opens a blank top-level page in the browser's one context
	// (so pages share Web Locks, BroadcastChannel, IndexedDB and storage).
	// window: a page in a window of its own (visible); otherwise a tab of
	// the first window (only the newest is visible, the others hidden).
	newPage(ctx context.Context, window bool) (pageDriver, error)
	// close closes every page and stops the browser process.
	close()
}

// page is one top-level browsing context. Every method is bounded by ctx.
type pageDriver interface {
	// navigate loads url and returns after its load event.
	navigate(ctx context.Context, url string) error
	// reload reloads the document and returns after its load event.
	reload(ctx context.Context) error
	// evaluate runs a script in the page's main realm (statements allowed;
	// its value is the last expression's), awaits it when it is a promise,
	// and returns the value as JSON ("null" for undefined). A thrown
	// exception or rejected promise is an *EvalError.
	evaluate(ctx context.Context, script string) ([]byte, error)
	// setOffline emulates (true) or ends (false) an offline network for
	// this page only: fetches fail, navigator.onLine and the online/offline
	// events follow.
	setOffline(ctx context.Context, offline bool) error
	// bypassCache makes every request of the page go to the network (true),
	// as a first visit does, or restores the default (false).
	bypassCache(ctx context.Context, bypass bool) error
	// addInitScript runs source in every document this page loads from now
	// on, before the document's own scripts.
	addInitScript(ctx context.Context, source string) error
	// click dispatches a real pointer click (press and release) at the
	// centre of the first element matching the CSS selector.
	click(ctx context.Context, selector string) error
	// screenshot returns a PNG of the whole document.
	screenshot(ctx context.Context) ([]byte, error)
	// close closes the page; it returns once the browser has discarded it
	// (its Web Locks released, its queued lock requests withdrawn).
	close(ctx context.Context) error
}

// EvalError is a script's exception or a promise's rejection.
type EvalError struct {
	Message string // the exception's text as the browser reports it
}

func (e *EvalError) Error() string { return "harness: script threw: " + e.Message }
