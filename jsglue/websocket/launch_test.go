//go:build !js

package websocket

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coder/websocket"

	"github.com/tabfence/tabfence/internal/wasmtest"
)

// TestWebSocketInChromium serves a few WebSocket endpoints on loopback and
// runs this package's wasm tests in Chromium against them. It needs
// go_js_wasm_exec on PATH (make wasmexec) and is skipped without it or
// with -short.
func TestWebSocketInChromium(t *testing.T) {
	hs := httptest.NewServer(endpoints())
	defer hs.Close()
	out := wasmtest.Run(t, hs.URL, "^TestSocket")
	if !bytes.Contains(out, []byte("--- PASS")) || bytes.Contains(out, []byte("--- SKIP")) {
		t.Fatalf("wasm tests did not run:\n%s", out)
	}
}

func endpoints() http.Handler {
	accept := func(w http.ResponseWriter, r *http.Request) *websocket.Conn {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: []string{"127.0.0.1:*"}})
		if err != nil {
			return nil
		}
		return c
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		c := accept(w, r)
		if c == nil {
			return
		}
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if string(b) == "close 4001" {
				c.Close(4001, "asked to")
				return
			}
			if c.Write(r.Context(), typ, b) != nil {
				return
			}
		}
	})
	mux.HandleFunc("/flood", func(w http.ResponseWriter, r *http.Request) {
		c := accept(w, r)
		if c == nil {
			return
		}
		defer c.CloseNow()
		for i := 0; i < 2000; i++ {
			if c.Write(context.Background(), websocket.MessageBinary, []byte{byte(i)}) != nil {
				return
			}
		}
		_, _, _ = c.Read(r.Context()) // until the client closes
	})
	mux.HandleFunc("/private", func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		}
		http.Error(w, "sign in", http.StatusUnauthorized)
	})
	return mux
}
