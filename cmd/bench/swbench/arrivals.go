package swbench

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tabfence/tabfence/e2e/harness"
	"github.com/tabfence/tabfence/wire"
)

// arrivals is what the server saw since the last reset, on its own clock:
// when each fencing token request and each send arrived, and when each
// answer that is a new effect (a 2xx that is not an idempotent replay) was
// written. The figures are differences of these and of the bench's clock
// read just before it triggers a flush (the same process, the same clock),
// never timers in the page or the worker.
type arrivals struct {
	mu      sync.Mutex
	fences  []time.Time
	sends   []time.Time
	effects []time.Time
	replays int // 2xx answers replayed from the receiver's idempotency record
	failed  int // any other answer to a send
	// Since the start, never reset: every send, and the new effects.
	allSends, allEffects int
}

func (a *arrivals) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fences, a.sends, a.effects, a.replays, a.failed = nil, nil, nil, 0, 0
}

// extraSends is how many sends since the start were not a new effect
// (replays, failures, or still unanswered): 0 when each mutation was sent
// once.
func (a *arrivals) extraSends() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allSends - a.allEffects
}

// snapshot is a copy of what arrived so far.
func (a *arrivals) snapshot() arrivals {
	a.mu.Lock()
	defer a.mu.Unlock()
	return arrivals{
		fences: append([]time.Time(nil), a.fences...), sends: append([]time.Time(nil), a.sends...),
		effects: append([]time.Time(nil), a.effects...), replays: a.replays, failed: a.failed,
	}
}

// extraSince is how many sends since the last reset were not a new
// effect; read once the flush has ended (its owner released the lock).
func (a *arrivals) extraSince() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sends) - len(a.effects)
}

func (a *arrivals) effectCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.effects)
}

// waitEffects waits until n new effects were answered.
func (a *arrivals) waitEffects(ctx context.Context, what string, n int, timeout time.Duration) error {
	return harness.Poll(ctx, what, timeout, 2*time.Millisecond, func() (bool, error) {
		return a.effectCount() >= n, nil
	})
}

// middleware notes the fencing token requests (POST /fence/...) and the
// sends (POST /api/notes) in front of the demo server.
func (a *arrivals) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		now := time.Now()
		switch {
		case strings.HasPrefix(r.URL.Path, "/fence/"):
			a.mu.Lock()
			a.fences = append(a.fences, now)
			a.mu.Unlock()
			next.ServeHTTP(w, r)
		case r.URL.Path == "/api/notes":
			a.mu.Lock()
			a.sends = append(a.sends, now)
			a.allSends++
			a.mu.Unlock()
			next.ServeHTTP(&answer{ResponseWriter: w, a: a}, r)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// answer notes when a send's answer was written, and whether it was a new
// effect.
type answer struct {
	http.ResponseWriter
	a     *arrivals
	wrote bool
}

func (w *answer) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.a.mu.Lock()
		switch {
		case code/100 == 2 && w.Header().Get(wire.HeaderReplayed) != "":
			w.a.replays++
		case code/100 == 2:
			w.a.effects = append(w.a.effects, time.Now())
			w.a.allEffects++
		default:
			w.a.failed++
		}
		w.a.mu.Unlock()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answer) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *answer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
