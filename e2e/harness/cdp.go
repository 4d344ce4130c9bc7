package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium is the Chromium binary the harness starts by default.
const Chromium = "/usr/bin/chromium"

// cdpEngine is Chromium driven over the Chrome DevTools Protocol.
type cdpEngine struct {
	ctx         context.Context // the browser's first tab; cancelling it closes the browser
	cancel      context.CancelFunc
	allocCancel context.CancelFunc
	bare        bool
}

// startCDP launches headless Chromium with a temporary profile.
func startCDP(ctx context.Context, o Options) (engine, error) {
	path := o.ExecPath
	if path == "" {
		path = Chromium
	}
	if _, err := os.Stat(path); err != nil {
		return nil, errors.New("harness: no browser at " + path + " (make chromium installs Debian's)")
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, chromiumFlags(path, o)...)
	bctx, bcancel := chromedp.NewContext(actx)
	if _, err := chromedp.Run(bctx, chromedp.Navigate("about:blank")); err != nil {
		bcancel()
		acancel()
		return nil, errors.New("harness: starting chromium: " + err.Error())
	}
	return &cdpEngine{ctx: bctx, cancel: bcancel, allocCancel: acancel, bare: o.Bare}, nil
}

// chromiumFlags are built from scratch, not from
// chromedp.DefaultExecAllocatorOptions, which always disables background
// throttling.
func chromiumFlags(path string, o Options) []chromedp.ExecAllocatorOption {
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
	return opts
}

func (e *cdpEngine) close() {
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	_ = chromedp.Cancel(ctx)
	e.cancel()
	e.allocCancel()
}

// newPage opens a target in the browser's context. Its context derives from
// the browser's, not from ctx: the first Run on a chromedp context creates
// the target, which lives as long as the context of that Run.
func (e *cdpEngine) newPage(ctx context.Context, window bool) (pageDriver, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pctx, cancel := chromedp.NewContext(e.ctx, chromedp.WithNewWindow(window))
	if _, err := chromedp.Run(pctx, chromedp.Navigate("about:blank")); err != nil {
		cancel()
		return nil, err
	}
	if e.bare {
		for _, c := range []cdp.Command[cdp.Empty, cdp.Empty]{network.Disable, dom.Disable, css.Disable} {
			if _, err := chromedp.Call(pctx, c, cdp.Empty{}); err != nil {
				cancel()
				return nil, errors.New("harness: bare tab: " + err.Error())
			}
		}
	}
	return &cdpPage{ctx: pctx, cancel: cancel}, nil
}

// cdpPage is one Chromium target.
type cdpPage struct {
	ctx    context.Context // the target's chromedp context
	cancel context.CancelFunc
}

// bound is the page's chromedp context, ended when ctx ends (and with its
// deadline), so a call is bounded by ctx and fails once the page is closed.
func (p *cdpPage) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(p.ctx)
	if d, ok := ctx.Deadline(); ok {
		var dcancel context.CancelFunc
		c, dcancel = context.WithDeadline(c, d)
		prev := cancel
		cancel = func() { dcancel(); prev() }
	}
	stop := context.AfterFunc(ctx, cancel)
	return c, func() { stop(); cancel() }
}

func (p *cdpPage) navigate(ctx context.Context, url string) error {
	c, cancel := p.bound(ctx)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.Navigate(url))
	return err
}

func (p *cdpPage) reload(ctx context.Context) error {
	c, cancel := p.bound(ctx)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.Reload())
	return err
}

// evaluate asks for the value by value (CDP's JSON); cdpJSON makes the
// values CDP cannot send as JSON come out as Firefox's engine and
// JSON.stringify give them.
func (p *cdpPage) evaluate(ctx context.Context, script string) ([]byte, error) {
	c, cancel := p.bound(ctx)
	defer cancel()
	res, err := chromedp.Run(c, chromedp.Evaluate[*runtime.RemoteObject](script, chromedp.EvalAwaitPromise, chromedp.EvalAsValue))
	var exc *chromedp.ExceptionError
	if errors.As(err, &exc) {
		return nil, &EvalError{Message: exc.Error()}
	}
	if err != nil {
		return nil, err
	}
	return cdpJSON(res)
}

// cdpJSON is a by-value result as JSON. undefined has no value (null);
// a top-level NaN, ±Infinity, -0 or BigInt comes as unserializableValue
// with none: NaN and ±Infinity become null and -0 becomes 0, as
// JSON.stringify writes them, and a BigInt is ErrNotJSON, as JSON.stringify
// (and the Firefox engine) rejects it.
func cdpJSON(res *runtime.RemoteObject) ([]byte, error) {
	if res == nil {
		return []byte("null"), nil
	}
	if u := string(res.UnserializableValue); u != "" {
		if j, ok := specialNumberJSON(u); ok {
			return []byte(j), nil
		}
		if res.Type == runtime.RemoteObjectTypeBigint || strings.HasSuffix(u, "n") {
			return nil, errBigInt
		}
		return nil, fmt.Errorf("harness: cdp unserializable value %q", u)
	}
	if len(res.Value) == 0 {
		return []byte("null"), nil
	}
	return []byte(res.Value), nil
}

// setOffline turns the Network domain on (a Bare tab has it off), then
// emulates the offline network for every request and navigator.onLine.
func (p *cdpPage) setOffline(ctx context.Context, off bool) error {
	c, cancel := p.bound(ctx)
	defer cancel()
	if _, err := chromedp.Call(c, network.Enable, network.EnableParams{}); err != nil {
		return err
	}
	conds := []*network.Conditions{}
	if off {
		conds = append(conds, &network.Conditions{Offline: true, DownloadThroughput: -1, UploadThroughput: -1})
	}
	if _, err := chromedp.Call(c, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{MatchedNetworkConditions: conds}); err != nil {
		return err
	}
	_, err := chromedp.Call(c, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: off, DownloadThroughput: -1, UploadThroughput: -1})
	return err
}

// bypassCache also keeps Chromium from serving cached compiled wasm.
func (p *cdpPage) bypassCache(ctx context.Context, bypass bool) error {
	c, cancel := p.bound(ctx)
	defer cancel()
	if _, err := chromedp.Call(c, network.Enable, network.EnableParams{}); err != nil {
		return err
	}
	_, err := chromedp.Call(c, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: bypass})
	return err
}

func (p *cdpPage) addInitScript(ctx context.Context, source string) error {
	c, cancel := p.bound(ctx)
	defer cancel()
	_, err := chromedp.Call(c, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: source})
	return err
}

// click waits for the element to be visible, as chromedp.Click does.
func (p *cdpPage) click(ctx context.Context, selector string) error {
	c, cancel := p.bound(ctx)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.Click(chromedp.CSS(selector)))
	return err
}

func (p *cdpPage) screenshot(ctx context.Context) ([]byte, error) {
	c, cancel := p.bound(ctx)
	defer cancel()
	return chromedp.Run(c, chromedp.FullScreenshot(100))
}

// close cancels the target's context: chromedp closes the target and
// returns once it is gone.
func (p *cdpPage) close(context.Context) error {
	p.cancel()
	return nil
}
