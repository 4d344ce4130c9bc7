//go:build js && wasm

package browser_test

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/realtime/browser"
)

// A ticket in the URL (url() may return ?ticket=...) never reaches the
// channel, which any same-origin script reads, nor any tab's status: the
// leader's last error is said in words.
func TestConnTicketNeverOnTheChannel(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	ws := "ws" + strings.TrimPrefix(f.base, "http") + "/rt?ticket=secret" + runID // no user: refused with 401
	cfg.URL = func(context.Context) (string, error) { return ws, nil }
	names, err := cfg.Names()
	if err != nil {
		t.Fatal(err)
	}
	// Another script of the origin, listening on the channel.
	seen := js.Global().Get("Array").New()
	bc := js.Global().Get("BroadcastChannel").New(names.Lock)
	cb := js.FuncOf(func(_ js.Value, args []js.Value) any {
		seen.Call("push", js.Global().Get("JSON").Call("stringify", args[0].Get("data")))
		return nil
	})
	defer cb.Release()
	bc.Set("onmessage", cb)
	defer bc.Call("close")
	var conns []*browser.Conn
	for i := 0; i < 2; i++ {
		c, err := browser.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		conns = append(conns, c)
	}
	waitFor(t, "every tab unauthorized with an error", func() bool {
		for _, c := range conns {
			if s := c.Status(); s.State != browser.StateUnauthorized || s.LastError == "" {
				return false
			}
		}
		return true
	})
	for _, c := range conns {
		if e := c.Status().LastError; strings.Contains(e, "secret") {
			t.Fatalf("status: %q", e)
		}
	}
	statuses := 0
	for i := 0; i < seen.Length(); i++ {
		m := seen.Index(i).String()
		statuses += strings.Count(m, "lastError")
		if strings.Contains(m, "secret") {
			t.Fatalf("channel message carries the ticket: %s", m)
		}
	}
	if statuses == 0 {
		t.Fatalf("no status heard on the channel (%d messages)", seen.Length())
	}
}

// A url() that never answers by itself ends with each dial (its context):
// the leader dials again, and no call is left waiting per dial.
func TestConnHangingURLEndsWithTheDial(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	var calls, waiting atomic.Int64
	cfg.URL = func(ctx context.Context) (string, error) {
		calls.Add(1)
		waiting.Add(1)
		defer waiting.Add(-1)
		<-ctx.Done()
		return "", ctx.Err()
	}
	cfg.Leader.PongTimeout = 100 * time.Millisecond
	cfg.Leader.Backoff = &outbox.Backoff{Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}
	c, err := browser.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	waitFor(t, "three dials", func() bool { return calls.Load() >= 3 })
	if n := waiting.Load(); n > 1 {
		t.Fatalf("%d url() calls still waiting after %d dials", n, calls.Load())
	}
}
