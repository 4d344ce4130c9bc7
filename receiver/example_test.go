package receiver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/wire"
)

// A business handler that records a payment. It writes through tx, so the
// write commits together with the idempotency record: a retried POST is
// replayed instead of paying twice.
func pay(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS payments (user_id TEXT NOT NULL, body TEXT NOT NULL)`); err != nil {
		return receiver.Response{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO payments (user_id, body) VALUES ($1, $2)`, r.Scope, string(r.Body)); err != nil {
		return receiver.Response{}, err
	}
	return receiver.JSON(http.StatusCreated, map[string]string{"status": "paid"})
}

func Example() {
	dir, _ := os.MkdirTemp("", "receiver-example")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	rc := receiver.New(store, receiver.Options{
		// Scope comes from your authentication; here a header, for brevity.
		Scope: func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return u, nil
			}
			return "", receiver.ErrUnauthenticated
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", rc.Handle(pay))
	mux.Handle("POST /fence/{resource...}", rc.FenceHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(key string) {
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(`{"amount":5}`))
		req.Header.Set("X-User", "alice")
		req.Header.Set(wire.HeaderIdempotencyKey, wire.FormatIdempotencyKey(key))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get(wire.HeaderReplayed), string(body))
	}
	post("pay-1")
	post("pay-1") // a retry: replayed, not paid again
	// Output:
	// 201  {"status":"paid"}
	// 201 true {"status":"paid"}
}

// Fencing: a leader obtains a token, then sends it with its writes. Once a
// newer leader's token was accepted, the old one is rejected with 409 and
// X-Fencing-Highest, and the old leader steps down.
func ExampleReceiver_FenceHandler() {
	dir, _ := os.MkdirTemp("", "receiver-example")
	defer os.RemoveAll(dir)
	store, _ := sqlitestore.Open(context.Background(), filepath.Join(dir, "app.db"))
	defer store.Close()
	rc := receiver.New(store, receiver.Options{
		Scope:  func(*http.Request) (string, error) { return "alice", nil },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx := context.Background()
	old, _ := rc.IssueToken(ctx, "alice", "doc:1")
	newer, _ := rc.IssueToken(ctx, "alice", "doc:1")
	h := rc.Handle(func(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
		return receiver.Response{Status: http.StatusNoContent}, nil
	})
	send := func(key string, token uint64) {
		req := httptest.NewRequest("POST", "/docs/1", nil)
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		req.Header.Set(wire.HeaderResource, "doc:1")
		req.Header.Set(wire.HeaderFencingToken, wire.FormatToken(token))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get(wire.HeaderFencingHighest),
			wire.Classify(w.Code, w.Header().Get(wire.HeaderFencingHighest) != ""))
	}
	send("from-new-leader", newer)
	send("from-old-leader", old)
	// Output:
	// 204  ack
	// 409 2 stale
}
