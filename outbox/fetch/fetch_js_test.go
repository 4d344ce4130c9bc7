//go:build js && wasm

package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/fetch"
	"github.com/tabfence/tabfence/outbox/idbstore"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// realFetch is the browser's fetch, captured before any test can replace
// globalThis.fetch with a mock.
var realFetch = js.Global().Get("fetch")

// A fetch that gets no HTTP answer is a Send error carrying fetch's
// TypeError: the outbox classifies it as a network failure and retries.
func TestFetchTransportNetworkError(t *testing.T) {
	tr := &fetch.Transport{BaseURL: "http://127.0.0.1:1", Fetch: realFetch}
	resp, err := tr.Send(context.Background(), outbox.Request{Method: "POST", Endpoint: "/api/commands", Body: []byte("{}"), Header: outbox.Header{wire.HeaderIdempotencyKey: `"k"`}})
	if err == nil || !errors.Is(err, jsglue.ErrType) {
		t.Fatalf("got %v (response %d %v %q)", err, resp.Status, resp.Header, resp.Body)
	}
	if v := outbox.Classify(outbox.Response{}, err, time.Now()); v.Outcome != wire.OutcomeRetry || v.Err.Code != "network" {
		t.Fatalf("classified %+v", v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Send(ctx, outbox.Request{Endpoint: "/x"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// The rest needs a receiver: TABFENCE_TEST_SERVER is set by the native
// TestFetchTransportInChromium, which starts one on loopback and runs this
// package's wasm tests in Chromium.
func testServer(t *testing.T) string {
	u := os.Getenv("TABFENCE_TEST_SERVER")
	if u == "" {
		t.Skip("TABFENCE_TEST_SERVER not set: run the native TestFetchTransportInChromium (go test ./outbox/)")
	}
	return u
}

func TestFetchTransportServer(t *testing.T) {
	base := testServer(t)
	ctx := context.Background()
	authorized := 0
	tr := &fetch.Transport{BaseURL: base, Credentials: "include", Fetch: realFetch,
		Authorize: func(_ context.Context, req outbox.Request, h outbox.Header) error {
			authorized++
			h["Authorization"] = "Bearer token-of-" + req.UserID
			return nil
		}}
	body := []byte{0, 1, 2, 250, '{', '}'}
	resp, err := tr.Send(ctx, outbox.Request{Method: "POST", Endpoint: "/echo", Body: body, UserID: "alice",
		Header: outbox.Header{wire.HeaderIdempotencyKey: `"k1"`, wire.HeaderOperationID: "op1"}})
	require.NoError(t, err)
	if resp.Status != 201 || !bytes.Equal(resp.Body, body) || authorized != 1 {
		t.Fatalf("echo: %+v", resp)
	}
	if got := resp.Header.Get("X-Echo-Authorization"); got != "Bearer token-of-alice" {
		t.Fatalf("authorization header not sent: %q (%v)", got, resp.Header)
	}
	if got := resp.Header.Get("X-Echo-Idempotency-Key"); got != `"k1"` {
		t.Fatalf("idempotency key: %q", got)
	}
	if got := resp.Header.Get("X-Echo-Content-Type"); got != "application/json" {
		t.Fatalf("content type: %q", got)
	}
	resp, err = tr.Send(ctx, outbox.Request{Endpoint: "/status/503"})
	if err != nil || resp.Status != 503 || resp.Header.Get(wire.HeaderRetryAfter) != "7" {
		t.Fatalf("503 is an answer, not an error: %+v %v", resp, err)
	}
	for _, p := range []string{"/big", "/big-chunked", "/gzip-bomb"} {
		if _, err := tr.Send(ctx, outbox.Request{Endpoint: p}); !errors.Is(err, fetch.ErrResponseTooLarge) {
			t.Fatalf("%s: %v", p, err)
		}
	}
	small := &fetch.Transport{BaseURL: base, MaxResponseBytes: 3, Fetch: realFetch}
	if _, err := small.Send(ctx, outbox.Request{Endpoint: "/echo", Body: []byte("four")}); !errors.Is(err, fetch.ErrResponseTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := tr.Send(tctx, outbox.Request{Endpoint: "/slow"}); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("slow answer not aborted: %v after %v", err, time.Since(start))
	}
	bad := &fetch.Transport{BaseURL: base, Fetch: realFetch, Authorize: func(context.Context, outbox.Request, outbox.Header) error { return errors.New("no token") }}
	if _, err := bad.Send(ctx, outbox.Request{Endpoint: "/echo"}); err == nil {
		t.Fatal("a failed Authorize must fail the send")
	}
}

// The whole browser path: IndexedDB store, flusher, fetch, and the
// receiver's idempotency on loopback.
func TestFetchTransportFlushEndToEnd(t *testing.T) {
	base := testServer(t)
	ctx := context.Background()
	s := openFresh(t)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	ob, err := outbox.New(outbox.Config{Name: "e2e", Store: s, Endpoint: "/commands?run=" + run,
		Transport: &fetch.Transport{BaseURL: base, Fetch: realFetch},
		Policies:  map[string]queue.Policy{"comment": {Dedupe: queue.Append}}})
	require.NoError(t, err)
	ob.Login(context.Background(), outbox.Session{UserID: "alice"})
	const n = 40
	for i := 0; i < n; i++ {
		_, err := ob.Enqueue(ctx, outbox.Op{OperationType: "comment", EntityID: "n" + strconv.Itoa(i%4), Payload: []byte(strconv.Itoa(i))})
		require.NoError(t, err)
	}
	lease, err := ob.Acquire(ctx, "tab1", true)
	require.NoError(t, err)
	rep, err := ob.Flush(ctx, lease)
	if err != nil || rep.Acked != n {
		t.Fatalf("flush %+v %v", rep, err)
	}
	tr := &fetch.Transport{BaseURL: base, Fetch: realFetch}
	resp, err := tr.Send(ctx, outbox.Request{Endpoint: "/count?run=" + run})
	if err != nil || string(resp.Body) != strconv.Itoa(n) {
		t.Fatalf("server applied %q (%v), want %d", resp.Body, err, n)
	}
}

// openFresh opens an IndexedDB store on a new database, deleted again after
// the test.
func openFresh(t *testing.T) *idbstore.Store {
	t.Helper()
	n, _ := queue.Names("fetch-"+strconv.FormatInt(time.Now().UnixNano(), 36), 1)
	s, err := idbstore.Open(context.Background(), n.Database)
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Close()
		_ = idb.Delete(context.Background(), n.Database, nil)
	})
	return s
}
