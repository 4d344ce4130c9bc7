//go:build js && wasm

package websocket_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/websocket"
)

func server(t *testing.T) string {
	u := os.Getenv("TABFENCE_TEST_SERVER")
	if u == "" {
		t.Skip("TABFENCE_TEST_SERVER not set: run the native TestWebSocketInChromium")
	}
	return u
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An http URL is dialed as ws; binary messages round-trip; the server's
// close code reaches CloseCode; every callback is released.
func TestSocketEchoAndClose(t *testing.T) {
	base := server(t)
	live := jsglue.LiveCallbacks()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := websocket.Dial(ctx, base+"/echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, []byte{0, 1, 2, 255}); err != nil {
		t.Fatal(err)
	}
	b, err := c.Recv(ctx)
	if err != nil || string(b) != "\x00\x01\x02\xff" {
		t.Fatalf("%q %v", b, err)
	}
	if err := c.Send(ctx, []byte("close 4001")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Recv(ctx)
	if got := c.CloseCode(err); got != 4001 {
		t.Fatalf("close code %d (%v)", got, err)
	}
	if !errors.Is(c.Send(ctx, []byte("x")), websocket.ErrClosed) {
		t.Fatal("sent on a closed socket")
	}
	if websocket.CloseCode(errors.New("other")) != -1 {
		t.Fatal("a non-close error has a code")
	}
	waitFor(t, "callbacks released", func() bool { return jsglue.LiveCallbacks() == live })
}

// A refused upgrade says its HTTP status (probed: the browser hides it).
func TestSocketDialStatus(t *testing.T) {
	base := server(t)
	live := jsglue.LiveCallbacks()
	_, err := websocket.Dial(context.Background(), base+"/private", nil)
	var de *websocket.DialError
	if !errors.As(err, &de) || de.Status != 401 {
		t.Fatalf("%v", err)
	}
	waitFor(t, "callbacks released", func() bool { return jsglue.LiveCallbacks() == live })
}

// A dial error names the origin and path, never the query (a ticket); a
// URL the browser refuses (here a fragment) is ErrInvalidURL without the URL.
func TestSocketDialErrorHidesTheQuery(t *testing.T) {
	base := server(t)
	_, err := websocket.Dial(context.Background(), base+"/private?ticket=secret", nil)
	var de *websocket.DialError
	if !errors.As(err, &de) || de.Status != 401 {
		t.Fatalf("%v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "secret") || !strings.Contains(msg, "/private") {
		t.Fatalf("dial error text: %q", msg)
	}
	_, err = websocket.Dial(context.Background(), base+"/private?ticket=secret#frag", nil)
	if !errors.Is(err, websocket.ErrInvalidURL) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("invalid URL: %v", err)
	}
}

// A reader that does not keep up is disconnected, counted, and never holds
// more than the queue.
func TestSocketQueueBound(t *testing.T) {
	base := server(t)
	before := websocket.Overruns()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := websocket.Dial(ctx, base+"/flood", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the overrun", func() bool { return websocket.Overruns() > before })
	n := 0
	for {
		_, err := c.Recv(ctx)
		if err != nil {
			if !errors.Is(err, websocket.ErrOverrun) {
				t.Fatalf("after %d: %v", n, err)
			}
			break
		}
		n++
	}
	if n > websocket.DefaultQueue {
		t.Fatalf("held %d messages", n)
	}
}
