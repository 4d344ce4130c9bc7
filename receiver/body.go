package receiver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tabfence/tabfence/wire"
)

// budget is the memory all request bodies of one Receiver may hold at
// once. take never waits: a server that is full answers 503 at once
// rather than queueing more connections behind slow uploads.
type budget struct {
	mu   sync.Mutex
	used int64
	max  int64
}

// take charges n bytes, or reports false when they do not fit.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.max-b.used {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// inUse reports the bytes charged now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// firstChunk is what a body is charged before its first byte is read; it
// is charged more, in doubling steps, only as its bytes arrive. Charging a
// declared Content-Length up front would let a few clients that declare
// large bodies and trickle them hold the whole budget.
const firstChunk = 16 << 10

// armBodyDeadline bounds the rest of the request's reading, including the
// discarding of a body the handler leaves unread. A writer that cannot set
// deadlines (httptest.ResponseRecorder, a middleware's wrapper without
// Unwrap) is served without one, and the receiver says so once. A stricter
// http.Server.ReadTimeout is kept.
func (rc *Receiver) armBodyDeadline(w http.ResponseWriter, r *http.Request) {
	d := rc.opts.BodyTimeout
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 && srv.ReadTimeout < d {
		d = srv.ReadTimeout
	}
	err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
	if err != nil {
		rc.noDeadline.Do(func() {
			rc.log.Warn("BodyTimeout not enforced: the ResponseWriter cannot set read deadlines (give wrappers an Unwrap method)",
				"err", err)
		})
	}
}

// disarmBodyDeadline lifts the deadline once the body is read, so that the
// handler's database work is bounded by Timeout only.
func disarmBodyDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// discardBody reads a body the handler has no use for to its end, within
// MaxBody and the armed deadline but holding no memory, and then lifts the
// deadline. Left armed, the deadline would fire in net/http's read of the
// idle connection during the database work and cancel r.Context().
func (rc *Receiver) discardBody(w http.ResponseWriter, r *http.Request) *Problem {
	if r.ContentLength > rc.opts.MaxBody {
		return tooLarge(rc.opts.MaxBody)
	}
	if _, err := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, rc.opts.MaxBody)); err != nil {
		return rc.bodyProblem(err)
	}
	disarmBodyDeadline(w)
	return nil
}

// readBody reads the request body within MaxBody, MaxBodyMemory and the
// armed deadline. On success the caller must call release once the body is
// no longer needed; on failure p is the answer and nothing is held.
func (rc *Receiver) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), p *Problem) {
	limit := rc.opts.MaxBody
	if r.ContentLength > limit {
		// Before the first read, so a client sending Expect: 100-continue
		// gets no 100 and never sends the body.
		return nil, nil, tooLarge(limit)
	}
	// A body never needs more than its declared length; one of unknown
	// length may need one byte past the limit to tell its end from an
	// oversized body.
	want := limit
	if r.ContentLength >= 0 {
		want = r.ContentLength
	}
	charge := min(want, firstChunk)
	if !rc.bodies.take(charge) {
		return nil, nil, &probBusy
	}
	release = func() { rc.bodies.give(charge) }
	buf := make([]byte, 0, charge)
	src := http.MaxBytesReader(w, r.Body, limit)
	for r.ContentLength < 0 || int64(len(buf)) < r.ContentLength {
		if len(buf) == cap(buf) {
			grow := max(min(2*int64(cap(buf)), want)-int64(cap(buf)), 1)
			if !rc.bodies.take(grow) {
				release()
				return nil, nil, &probBusy
			}
			charge += grow
			grown := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(grown, buf)
			buf = grown
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			release()
			return nil, nil, rc.bodyProblem(err)
		}
	}
	if rc.opts.RejectInvalidUTF8 && !utf8.Valid(buf) {
		release()
		return nil, nil, &probInvalidUTF8
	}
	return buf, release, nil
}

// bodyProblem explains why reading a body failed.
func (rc *Receiver) bodyProblem(err error) *Problem {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(rc.opts.MaxBody)
	case errors.Is(err, os.ErrDeadlineExceeded):
		p := probBodyTimeout
		p.Detail = fmt.Sprintf("The body did not arrive within %s; nothing was stored. Retry with the same Idempotency-Key.",
			rc.opts.BodyTimeout)
		return &p
	default:
		return &probBodyUnreadable
	}
}

func tooLarge(limit int64) *Problem {
	p := probTooLarge
	p.Detail = fmt.Sprintf("The limit is %d bytes; nothing was stored.", limit)
	return &p
}

// writeBodyProblem answers a body refusal. The connection is closed after
// it: the body was not read to its end, so the next request on it cannot be
// found.
func writeBodyProblem(w http.ResponseWriter, p Problem) {
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set(wire.HeaderRetryAfter, "1")
	}
	if p.Status != http.StatusUnprocessableEntity {
		w.Header().Set("Connection", "close")
	}
	writeProblem(w, p)
}
