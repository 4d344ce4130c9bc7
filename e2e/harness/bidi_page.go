package harness

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// bidiPage is one top-level browsing context of the Firefox engine.
type bidiPage struct {
	conn *bidiConn
	id   string // the BiDi context id

	mu      sync.Mutex
	closers []func(context.Context) // run by close first (network logs)
}

// onClose registers f to run when the page closes, before the context
// goes.
func (p *bidiPage) onClose(f func(context.Context)) {
	p.mu.Lock()
	p.closers = append(p.closers, f)
	p.mu.Unlock()
}

func (p *bidiPage) navigate(ctx context.Context, url string) error {
	params := map[string]any{"context": p.id, "url": url, "wait": "complete"}
	return p.conn.call(ctx, "browsingContext.navigate", params, nil)
}

func (p *bidiPage) reload(ctx context.Context) error {
	params := map[string]any{"context": p.id, "wait": "complete"}
	return p.conn.call(ctx, "browsingContext.reload", params, nil)
}

// evalResult is script.evaluate's result: a value or an exception.
type evalResult struct {
	Type             string          `json:"type"`
	Result           json.RawMessage `json:"result"`
	ExceptionDetails struct {
		Text string `json:"text"`
	} `json:"exceptionDetails"`
}

// evaluate runs script in the page's main realm. The result is sent by
// value (resultOwnership none keeps no handle alive in the page) to any
// depth, and converted to JSON here (remoteJSON).
func (p *bidiPage) evaluate(ctx context.Context, script string) ([]byte, error) {
	params := map[string]any{
		"expression":           script,
		"target":               map[string]any{"context": p.id},
		"awaitPromise":         true,
		"resultOwnership":      "none",
		"serializationOptions": map[string]any{"maxObjectDepth": nil, "maxDomDepth": 0},
	}
	var r evalResult
	if err := p.conn.call(ctx, "script.evaluate", params, &r); err != nil {
		return nil, err
	}
	if r.Type == "exception" {
		return nil, &EvalError{Message: r.ExceptionDetails.Text}
	}
	return remoteJSON(r.Result)
}

func (p *bidiPage) setOffline(ctx context.Context, offline bool) error {
	var conds any // null: the real network again
	if offline {
		conds = map[string]any{"type": "offline"}
	}
	params := map[string]any{"networkConditions": conds, "contexts": []string{p.id}}
	return p.conn.call(ctx, "emulation.setNetworkConditions", params, nil)
}

func (p *bidiPage) bypassCache(ctx context.Context, bypass bool) error {
	behavior := "default"
	if bypass {
		behavior = "bypass"
	}
	params := map[string]any{"cacheBehavior": behavior, "contexts": []string{p.id}}
	return p.conn.call(ctx, "network.setCacheBehavior", params, nil)
}

// addInitScript installs source as a preload script of this context. A
// preload script is a function declaration; source becomes its body, run
// in the page's own realm (not a sandbox) so it can change the globals
// the page's scripts see. Wrapping it keeps it free of eval, which a
// page's Content-Security-Policy may forbid.
func (p *bidiPage) addInitScript(ctx context.Context, source string) error {
	params := map[string]any{
		"functionDeclaration": "function () {\n" + source + "\n}",
		"contexts":            []string{p.id},
	}
	return p.conn.call(ctx, "script.addPreloadScript", params, nil)
}

// clickTarget scrolls the element into view and returns its centre in
// viewport coordinates, or null while nothing matches or the element has
// no box (not rendered, or zero-sized). The scroll is instant: a smooth
// one would leave the element moving under the pointer.
const clickTarget = `((sel) => {
	const el = document.querySelector(sel);
	if (!el) return null;
	let r = el.getBoundingClientRect();
	if (r.width === 0 || r.height === 0) return null;
	el.scrollIntoView({block: "center", inline: "center", behavior: "instant"});
	r = el.getBoundingClientRect();
	return [r.left + r.width / 2, r.top + r.height / 2];
})(%s)`

// ErrNoElement is returned by click when no element with a box matched
// the selector before ctx ended.
var ErrNoElement = errors.New("harness: no element with a box matches the selector")

// clickPoll is how often click looks again for an element not there yet.
const clickPoll = 20 * time.Millisecond

// clickPoint waits, as chromedp.Click does, until an element matching
// selector exists and has a box, and returns its centre.
func (p *bidiPage) clickPoint(ctx context.Context, selector string) (x, y int, err error) {
	sel, _ := json.Marshal(selector)
	for {
		raw, err := p.evaluate(ctx, fmt.Sprintf(clickTarget, sel))
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, fmt.Errorf("%w: %s (%w)", ErrNoElement, selector, ctx.Err())
			}
			return 0, 0, err
		}
		var at []float64
		if json.Unmarshal(raw, &at) == nil && len(at) == 2 {
			return int(math.Floor(at[0])), int(math.Floor(at[1])), nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("%w: %s (%w)", ErrNoElement, selector, ctx.Err())
		case <-time.After(clickPoll):
		}
	}
}

// click moves the mouse to the element's centre and presses and releases
// its main button: input events the page sees as trusted.
func (p *bidiPage) click(ctx context.Context, selector string) error {
	x, y, err := p.clickPoint(ctx, selector)
	if err != nil {
		return err
	}
	params := map[string]any{
		"context": p.id,
		"actions": []any{map[string]any{
			"type":       "pointer",
			"id":         "harness-mouse",
			"parameters": map[string]any{"pointerType": "mouse"},
			"actions": []any{
				map[string]any{"type": "pointerMove", "x": x, "y": y},
				map[string]any{"type": "pointerDown", "button": 0},
				map[string]any{"type": "pointerUp", "button": 0},
			},
		}},
	}
	return p.conn.call(ctx, "input.performActions", params, nil)
}

func (p *bidiPage) screenshot(ctx context.Context) ([]byte, error) {
	params := map[string]any{"context": p.id, "origin": "document"}
	var r struct {
		Data string `json:"data"`
	}
	if err := p.conn.call(ctx, "browsingContext.captureScreenshot", params, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// close closes the context and returns once the browser reports it
// destroyed (browsingContext.contextDestroyed), so its Web Locks are
// released and its queued lock requests withdrawn.
func (p *bidiPage) close(ctx context.Context) error {
	p.mu.Lock()
	closers := p.closers
	p.closers = nil
	p.mu.Unlock()
	for _, f := range closers {
		f(ctx)
	}
	wait, cancel := p.conn.await("browsingContext.contextDestroyed", func(params json.RawMessage) bool {
		var c struct {
			Context string `json:"context"`
		}
		return json.Unmarshal(params, &c) == nil && c.Context == p.id
	})
	defer cancel()
	params := map[string]any{"context": p.id}
	if err := p.conn.call(ctx, "browsingContext.close", params, nil); err != nil {
		return err
	}
	_, err := wait(ctx)
	return err
}
