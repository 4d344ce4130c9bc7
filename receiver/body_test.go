package receiver

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// chunked hides the length of a body, as a chunked upload does.
type chunked struct{ io.Reader }

// A body of unknown length is charged as it grows, never more than the cap,
// and all of it is given back on release or on refusal.
func TestBodyOfUnknownLengthIsChargedAsItGrows(t *testing.T) {
	const limit = 256 << 10
	rc := New(nil, Options{MaxBody: limit, MaxBodyMemory: limit + 1})
	read := func(size int) ([]byte, func(), *Problem) {
		r := httptest.NewRequest("POST", "/x", chunked{bytes.NewReader(bytes.Repeat([]byte("x"), size))})
		r.ContentLength = -1
		return rc.readBody(httptest.NewRecorder(), r)
	}
	for _, size := range []int{0, 1, firstChunk, firstChunk + 1, 100 << 10, limit} {
		body, release, p := read(size)
		if p != nil || len(body) != size {
			t.Fatalf("size %d: %d bytes, problem %+v", size, len(body), p)
		}
		if used := rc.bodies.inUse(); used < int64(size) || used > limit+1 || used != int64(cap(body)) {
			t.Fatalf("size %d: charged %d for a buffer of %d", size, used, cap(body))
		}
		release()
		if used := rc.bodies.inUse(); used != 0 {
			t.Fatalf("size %d: %d bytes still charged after release", size, used)
		}
	}
	if _, _, p := read(limit + 1); p == nil || p.Status != 413 || rc.bodies.inUse() != 0 {
		t.Fatalf("oversized chunked body: %+v, charged %d", p, rc.bodies.inUse())
	}
	// Other requests hold most of the memory: a growing body is refused
	// with 503 once it no longer fits, and its partial charge is given back.
	if !rc.bodies.take(limit - 64<<10) {
		t.Fatal("setup")
	}
	if _, _, p := read(100 << 10); p == nil || p.Status != 503 {
		t.Fatalf("growing past the cap: %+v, want 503", p)
	}
	if used := rc.bodies.inUse(); used != limit-64<<10 {
		t.Fatalf("charged %d after a refusal, want %d", used, limit-64<<10)
	}
}

// The cap holds under concurrency: many readers at once never charge more
// than MaxBodyMemory, and every byte comes back.
func TestBodyBudgetNeverExceedsCap(t *testing.T) {
	rc := New(nil, Options{MaxBody: 1000, MaxBodyMemory: 5000})
	done := make(chan bool)
	for i := 0; i < 50; i++ {
		go func() {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("x", 1000)))
			_, release, p := rc.readBody(httptest.NewRecorder(), r)
			if used := rc.bodies.inUse(); used > 5000 {
				t.Errorf("charged %d > cap", used)
			}
			if p == nil {
				release()
			}
			done <- p == nil
		}()
	}
	for i := 0; i < 50; i++ {
		<-done
	}
	if used := rc.bodies.inUse(); used != 0 {
		t.Fatalf("%d bytes still charged", used)
	}
}
