//go:build !js

package fetch

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabfence/tabfence/internal/wasmtest"
	"github.com/tabfence/tabfence/wire"
)

// TestFetchTransportInChromium starts a loopback receiver and runs this
// package's Transport wasm tests in Chromium against it (wasmbrowsertest
// passes the environment through). It needs go_js_wasm_exec on PATH (make
// wasmexec) and is skipped without it or with -short.
func TestFetchTransportInChromium(t *testing.T) {
	srv := httptest.NewServer(testReceiver())
	defer srv.Close()
	out := wasmtest.Run(t, srv.URL, "^TestFetchTransport")
	for _, name := range []string{"TestFetchTransportServer", "TestFetchTransportFlushEndToEnd", "TestFetchTransportNetworkError"} {
		if !bytes.Contains(out, []byte("--- PASS: "+name)) {
			t.Fatalf("%s did not pass:\n%s", name, out)
		}
	}
}

// testReceiver is a tiny receiver with CORS (the test page is served from
// another loopback port) and idempotency by key.
func testReceiver() http.Handler {
	var mu sync.Mutex
	applied := map[string]map[string]bool{} // run -> keys
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if o := r.Header.Get("Origin"); o != "" {
			h.Set("Access-Control-Allow-Origin", o)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "X-Echo-Authorization, X-Echo-Idempotency-Key, X-Echo-Content-Type, Retry-After, Idempotent-Replayed")
		}
		if r.Method == http.MethodOptions {
			h.Set("Access-Control-Allow-Methods", "POST, GET")
			h.Set("Access-Control-Allow-Headers", r.Header.Get("Access-Control-Request-Headers"))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		switch {
		case r.URL.Path == "/echo":
			body, _ := io.ReadAll(r.Body)
			for _, k := range []string{"Authorization", "Idempotency-Key", "Content-Type"} {
				h.Set("X-Echo-"+k, r.Header.Get(k))
			}
			w.WriteHeader(http.StatusCreated)
			w.Write(body)
		case strings.HasPrefix(r.URL.Path, "/status/"):
			code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
			h.Set("Retry-After", "7")
			w.WriteHeader(code)
		case r.URL.Path == "/big":
			w.Write(bytes.Repeat([]byte("x"), 2<<20))
		case r.URL.Path == "/gzip-bomb":
			// 2 KiB on the wire, 2 MiB once the browser decodes it: its
			// Content-Length says nothing of the body the page reads.
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(make([]byte, 2<<20))
			zw.Close()
			h.Set("Content-Encoding", "gzip")
			h.Set("Content-Length", strconv.Itoa(z.Len()))
			w.Write(z.Bytes())
		case r.URL.Path == "/big-chunked":
			for i := 0; i < 40; i++ {
				w.Write(bytes.Repeat([]byte("y"), 64<<10))
				w.(http.Flusher).Flush()
			}
		case r.URL.Path == "/slow":
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		case r.URL.Path == "/commands":
			key, err := wire.ParseIdempotencyKey(r.Header.Get(wire.HeaderIdempotencyKey))
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			run := r.URL.Query().Get("run")
			mu.Lock()
			if applied[run] == nil {
				applied[run] = map[string]bool{}
			}
			replay := applied[run][key]
			applied[run][key] = true
			mu.Unlock()
			if replay {
				h.Set(wire.HeaderReplayed, "true")
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"ok":true}`))
		case r.URL.Path == "/count":
			mu.Lock()
			n := len(applied[r.URL.Query().Get("run")])
			mu.Unlock()
			w.Write([]byte(strconv.Itoa(n)))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
}
