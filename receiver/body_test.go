package receiver

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.Nil(t, p, "size %d: %d bytes, problem %+v", size, len(body), p)
		require.Len(t, body, size, "size %d: %d bytes, problem %+v", size, len(body), p)
		used := rc.bodies.inUse()
		require.GreaterOrEqual(t, used, int64(size), "size %d: charged %d for a buffer of %d", size, used, cap(body))
		require.LessOrEqual(t, used, int64(limit+1), "size %d: charged %d for a buffer of %d", size, used, cap(body))
		require.Equal(t, int64(cap(body)), used, "size %d: charged %d for a buffer of %d", size, used, cap(body))
		release()
		used = rc.bodies.inUse()
		require.Equal(t, int64(0), used, "size %d: %d bytes still charged after release", size, used)
	}
	_, _, p := read(limit + 1)
	require.NotNil(t, p, "oversized chunked body: %+v, charged %d", p, rc.bodies.inUse())
	require.Equal(t, 413, p.Status, "oversized chunked body: %+v, charged %d", p, rc.bodies.inUse())
	require.Equal(t, int64(0), rc.bodies.inUse(), "oversized chunked body: %+v, charged %d", p, rc.bodies.inUse())
	// Other requests hold most of the memory: a growing body is refused
	// with 503 once it no longer fits, and its partial charge is given back.
	require.True(t, rc.bodies.take(limit-64<<10), "setup")
	_, _, p = read(100 << 10)
	require.NotNil(t, p, "growing past the cap: %+v, want 503", p)
	require.Equal(t, 503, p.Status, "growing past the cap: %+v, want 503", p)
	used := rc.bodies.inUse()
	require.Equal(t, int64(limit-64<<10), used, "charged %d after a refusal", used)
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
			used := rc.bodies.inUse()
			assert.LessOrEqual(t, used, int64(5000), "charged %d > cap", used)
			if p == nil {
				release()
			}
			done <- p == nil
		}()
	}
	for i := 0; i < 50; i++ {
		<-done
	}
	used := rc.bodies.inUse()
	require.Equal(t, int64(0), used, "%d bytes still charged", used)
}

// Clients that declare large bodies and trickle them hold only about what
// they have sent, so they cannot keep a small honest body out; the cap
// still refuses once the bytes that really arrived fill it, and every
// charge comes back when the uploads end.
func TestTrickledBodiesAreChargedWhatArrived(t *testing.T) {
	const limit, slow = 256 << 10, 4
	rc := New(nil, Options{MaxBody: limit, MaxBodyMemory: slow * limit})
	honest := func() *Problem {
		_, release, p := rc.readBody(httptest.NewRecorder(), httptest.NewRequest("POST", "/x", strings.NewReader("small")))
		if p == nil {
			release()
		}
		return p
	}
	writers := make([]*io.PipeWriter, slow)
	done := make(chan *Problem, slow)
	for i := range writers {
		pr, pw := io.Pipe()
		writers[i] = pw
		r := httptest.NewRequest("POST", "/x", pr)
		r.ContentLength = limit
		go func() {
			_, _, p := rc.readBody(httptest.NewRecorder(), r)
			done <- p
		}()
		// A pipe's write returns once the reader has the byte: the body is
		// being read and charged.
		_, err := pw.Write([]byte("x"))
		require.NoError(t, err)
	}
	p := honest()
	require.Nil(t, p, "%d uploads that sent 1 byte each keep out a 5-byte body: %+v (charged %d)", slow, p, rc.bodies.inUse())
	used := rc.bodies.inUse()
	require.LessOrEqual(t, used, int64(slow*firstChunk), "%d uploads of 1 byte charged %d", slow, used)
	// Now the uploads really hold the memory: all but their last byte.
	for _, pw := range writers {
		_, err := pw.Write(bytes.Repeat([]byte("x"), limit-2))
		require.NoError(t, err)
	}
	p = honest()
	require.NotNil(t, p, "with %d bytes held: %+v, want 503 (charged %d)", slow*(limit-1), p, rc.bodies.inUse())
	require.Equal(t, 503, p.Status, "with %d bytes held: %+v, want 503 (charged %d)", slow*(limit-1), p, rc.bodies.inUse())
	for _, pw := range writers {
		_ = pw.CloseWithError(io.ErrUnexpectedEOF)
	}
	for range writers {
		p := <-done
		require.NotNil(t, p, "cut upload: %+v, want 400", p)
		require.Equal(t, 400, p.Status, "cut upload: %+v, want 400", p)
	}
	used = rc.bodies.inUse()
	require.Equal(t, int64(0), used, "%d bytes still charged", used)
}
