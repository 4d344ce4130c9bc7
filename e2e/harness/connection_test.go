package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The tap sees coder/websocket's upgrades (it hijacks through the tap's
// writer), counts the sockets either side closes, records refusals, and
// Drop cuts the server's side so the client's read fails.
func TestRealtimeTap(t *testing.T) {
	tap := NewRealtimeTap("/realtime")
	ts := httptest.NewServer(tap.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("user") == "" {
			http.Error(w, "no user", http.StatusUnauthorized)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, b); err != nil {
				return
			}
		}
	})))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + "/realtime"

	if _, _, err := websocket.Dial(ctx, url, nil); err == nil {
		t.Fatal("a dial without a user was upgraded")
	}
	a, _, err := websocket.Dial(ctx, url+"?user=a", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := websocket.Dial(ctx, url+"?user=b", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The client reads the 101 as the server hijacks: the tap counts the
	// socket a moment later.
	waitOpen(t, tap, 2)
	if got := tap.Dials(); !slices.Equal(got, []int{401, 101, 101}) || tap.Upgrades() != 2 {
		t.Fatalf("dials %v, upgrades %d; want [401 101 101], 2", got, tap.Upgrades())
	}
	if err := a.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
	waitOpen(t, tap, 1)
	if n := tap.Drop(); n != 1 {
		t.Fatalf("Drop cut %d sockets, want 1", n)
	}
	if _, _, err := b.Read(ctx); err == nil {
		t.Fatal("read after Drop succeeded")
	}
	waitOpen(t, tap, 0)
}

func waitOpen(t *testing.T, tap *RealtimeTap, n int) {
	t.Helper()
	if err := Poll(context.Background(), "open sockets", 5*time.Second, 10*time.Millisecond, func() (bool, error) {
		return tap.Open() == n, nil
	}); err != nil {
		t.Fatalf("%v: %d open, want %d", err, tap.Open(), n)
	}
}
