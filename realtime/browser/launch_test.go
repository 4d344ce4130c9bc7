//go:build !js

package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/internal/wasmtest"
	"github.com/tabfence/tabfence/receiver"
	server "github.com/tabfence/tabfence/receiver/realtime"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
)

// TestConnInChromium starts receiver/realtime on loopback (SQLite, an
// in-memory feed) and runs this package's wasm tests in Chromium against it
// (wasmbrowsertest passes the environment through). It needs
// go_js_wasm_exec on PATH (make wasmexec) and is skipped without it or
// with -short.
func TestConnInChromium(t *testing.T) {
	hs := httptest.NewServer(itemsServer(t))
	defer hs.Close()
	run := os.Getenv("TABFENCE_RUN")
	if run == "" {
		run = "^TestConn"
	}
	out := wasmtest.Run(t, hs.URL, run)
	if !bytes.Contains(out, []byte("--- PASS")) || bytes.Contains(out, []byte("--- SKIP")) {
		t.Fatalf("wasm tests did not run:\n%s", out)
	}
}

// itemsServer is the realtime endpoint at /rt (users by ?user=, a mutation
// "put" stores its payload {"id",...} as item id and publishes the change)
// and a control API for the wasm tests under /ctl/, with CORS: the test
// page is served from another loopback port.
func itemsServer(t *testing.T) http.Handler {
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rt.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	var mu sync.Mutex
	applied := map[string]int{}  // user -> mutations applied
	upgrades := map[string]int{} // user -> upgrade requests
	rc := receiver.New(store, receiver.Options{Scope: func(r *http.Request) (string, error) {
		if u := r.URL.Query().Get("user"); u != "" {
			return u, nil
		}
		return "", receiver.ErrUnauthenticated
	}})
	srv := server.New(rc, server.NewMemFeed(0), func(ctx context.Context, tx receiver.Tx, r *server.Request) (server.Result, error) {
		var item struct {
			ID string `json:"id"`
		}
		if r.Op != "put" || json.Unmarshal(r.Payload, &item) != nil || item.ID == "" {
			return server.Result{Response: receiver.Response{Status: 422}}, nil
		}
		mu.Lock()
		applied[r.Scope]++
		mu.Unlock()
		ch, _ := json.Marshal([]map[string]any{{"store": "items", "key": item.ID, "value": json.RawMessage(r.Payload)}})
		return server.Result{Response: receiver.Response{Status: 201, Body: []byte(`{"ok":true}`)}, Changes: ch}, nil
	}, server.Options{Accept: &websocket.AcceptOptions{OriginPatterns: []string{"127.0.0.1:*"}}})
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/rt", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			mu.Lock()
			upgrades[r.URL.Query().Get("user")]++
			mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	})
	// A server of another protocol: it closes every socket with 4426
	// (counted as upgrades of the user "old-<user>").
	mux.HandleFunc("/rt-old", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upgrades["old-"+r.URL.Query().Get("user")]++
		mu.Unlock()
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: []string{"127.0.0.1:*"}})
		if err != nil {
			return
		}
		_ = c.Close(4426, "protocol not spoken here")
	})
	// The receiver's fencing tokens, the user in the path (FencePath is a
	// prefix: the resource follows it).
	fence := rc.FenceHandler()
	mux.HandleFunc("POST /u/{user}/fence/{resource...}", func(w http.ResponseWriter, r *http.Request) {
		r.URL.RawQuery = "user=" + r.PathValue("user")
		fence.ServeHTTP(w, r)
	})
	// A write of another leader under token (for fencing tests).
	mux.HandleFunc("/ctl/fenced", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		tok, _ := strconv.ParseUint(q.Get("token"), 10, 64)
		resp := rc.Apply(r.Context(), receiver.Mutation{Scope: q.Get("user"), Key: "newer-" + q.Get("token"), Target: "put newer",
			Body: []byte("{}"), Resource: q.Get("resource"), Token: tok, HTTP: r},
			func(context.Context, receiver.Tx, *receiver.Request) (receiver.Response, error) {
				return receiver.Response{Status: 201}, nil
			})
		w.Write([]byte(strconv.Itoa(resp.Status)))
	})
	mux.HandleFunc("/ctl/snapshot", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"version":0,"changes":[{"store":"items","key":"snap","value":{"id":"snap"}}]}`))
	})
	mux.HandleFunc("/ctl/badsnapshot", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "insufficient storage", http.StatusInsufficientStorage)
	})
	mux.HandleFunc("/ctl/publish", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d, err := srv.Publish(r.Context(), r.URL.Query().Get("user"), body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Write([]byte(strconv.FormatUint(d.Version, 10)))
	})
	mux.HandleFunc("/ctl/count", func(w http.ResponseWriter, r *http.Request) {
		u := r.URL.Query().Get("user")
		mu.Lock()
		defer mu.Unlock()
		w.Write([]byte(strconv.Itoa(applied[u]) + " " + strconv.Itoa(upgrades[u]) + " " + strconv.FormatInt(srv.Stats().Open, 10)))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		}
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
			w.Header().Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
