package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

func TestFailureOf(t *testing.T) {
	for _, c := range []struct {
		e     queue.ErrorInfo
		kind  outbox.FailureKind
		fence outbox.FailureKind
	}{
		{queue.ErrorInfo{Code: queue.CodeOffline}, outbox.FailureOffline, outbox.FailureOffline},
		{queue.ErrorInfo{Code: queue.CodeNetwork}, outbox.FailureUnreachable, outbox.FailureUnreachable},
		{queue.ErrorInfo{Code: "http_503", Status: 503}, outbox.FailureServerError, outbox.FailureServerError},
		{queue.ErrorInfo{Code: "http_408", Status: 408}, outbox.FailureServerError, outbox.FailureServerError},
		{queue.ErrorInfo{Code: "http_429", Status: 429}, outbox.FailureRateLimited, outbox.FailureRateLimited},
		{queue.ErrorInfo{Code: "http_401", Status: 401}, outbox.FailurePausedAuth, outbox.FailureUnauthorized},
		{queue.ErrorInfo{Code: "http_422", Status: 422}, "", outbox.FailureRefused},
		{queue.ErrorInfo{Code: "http_409", Status: 409}, "", outbox.FailureRefused},
		{queue.ErrorInfo{Code: queue.CodeSchemaUnsupported}, "", outbox.FailureRefused},
	} {
		k, ok := outbox.FailureOf(c.e)
		if k != c.kind || ok != (c.kind != "") {
			t.Fatalf("failureOf(%+v) = %q %v, want %q", c.e, k, ok, c.kind)
		}
		require.Equal(t, c.fence, outbox.FenceFailureOf(c.e), c.e.Code)
	}
	require.Equal(t, queue.ErrorInfo{Code: queue.CodeOffline, Message: "fence: x"}, outbox.FenceError(0, errors.New("x"), true))
	require.Equal(t, queue.ErrorInfo{Code: queue.CodeNetwork, Message: "fence: x"}, outbox.FenceError(0, errors.New("x"), false))
	require.Equal(t, queue.ErrorInfo{Code: "http_502", Message: "fence: answered 502", Status: 502}, outbox.FenceError(502, nil, false))
}

// failureOf follows wire.Classify for every status: a send failure exactly
// when the answer is retried or pauses for auth, so the status never says
// failing for an answer the flusher settles, nor the reverse.
func TestFailureOfFollowsClassify(t *testing.T) {
	for st := 100; st < 600; st++ {
		k, ok := outbox.FailureOf(queue.ErrorInfo{Code: "http_" + strconv.Itoa(st), Status: st})
		out := wire.Classify(st, false)
		want := out == wire.OutcomeRetry || out == wire.OutcomeAuth
		require.Equal(t, want, ok, strconv.Itoa(st))
		require.Equal(t, out == wire.OutcomeAuth, k == outbox.FailurePausedAuth, strconv.Itoa(st))
	}
}

// The status says that sending fails, why and when it is tried next, and
// clears once a flush reaches the server again.
func TestStatusShowsSendFailure(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	status := func() outbox.Projection {
		t.Helper()
		p, err := h.ob.Status(ctx)
		require.NoError(t, err)
		return p
	}
	down := func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{}, errors.New("TypeError: Failed to fetch")
	}
	for _, c := range []struct {
		name  string
		reply func(outbox.Request) (outbox.Response, error)
		kind  outbox.FailureKind
		next  bool
	}{
		{"server down", down, outbox.FailureUnreachable, true},
		{"5xx", func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 503}, nil }, outbox.FailureServerError, true},
		{"429", func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 429}, nil }, outbox.FailureRateLimited, true},
		{"offline", func(outbox.Request) (outbox.Response, error) {
			return outbox.Response{}, errors.Join(outbox.ErrOffline, errors.New("offline"))
		}, outbox.FailureOffline, false},
	} {
		a := h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte(c.name)})
		require.False(t, status().Failure.Failing(), c.name)
		h.reply = c.reply
		started := h.clock.Now()
		_, _ = h.flush("A")
		p := status()
		f := p.Failure
		require.Equal(t, c.kind, f.Kind, c.name)
		require.True(t, p.LastError != nil && *p.LastError == f.Error && f.Error.Message != "", c.name)
		require.Equal(t, started, f.Since, c.name)
		if c.next {
			require.Equal(t, h.get(a.ID).NextAttemptAt, f.NextAttemptAt, c.name)
			require.True(t, f.NextAttemptAt.After(h.clock.Now()), c.name)
		} else {
			require.True(t, f.NextAttemptAt.IsZero(), c.name)
		}
		// Still failing on the next attempt: the spell keeps its start.
		h.clock.Add(time.Hour)
		_, _ = h.flush("A")
		require.Equal(t, started, status().Failure.Since, c.name)

		h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 200}, nil }
		h.ob.Reconnected()
		h.clock.Add(time.Hour)
		_, err := h.flush("A")
		require.NoError(t, err)
		p = status()
		require.Equal(t, queue.StatusAcked, h.get(a.ID).Status, c.name)
		require.False(t, p.Failure.Failing(), c.name)
		require.True(t, p.LastError == nil, c.name)
	}
}

// A 401 pauses the user's queue: the status says paused-auth with no next
// attempt (Resume makes it), and Resume clears it.
func TestStatusPausedAuth(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("p")})
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 401}, nil }
	_, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrAuthRequired)
	p, _ := h.ob.Status(ctx)
	require.Equal(t, outbox.FailurePausedAuth, p.Failure.Kind)
	require.True(t, p.Failure.NextAttemptAt.IsZero())
	require.NoError(t, h.ob.Resume(ctx))
	p, _ = h.ob.Status(ctx)
	require.False(t, p.Failure.Failing())
}

// A failed fencing token request is recorded for every tab; an answer of
// the server (the next token, NoteReached) ends it even when nothing is
// due, a flush that sent nothing does not.
func TestFenceFailureStatus(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	// A record waiting for its retry: something to send, nothing due.
	h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("p")})
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 503}, nil }
	_, _ = h.flush("A")
	next := h.clock.Now().Add(4 * time.Second)
	require.NoError(t, h.ob.NoteFenceFailure(ctx, outbox.FenceError(0, errors.New("TypeError: Failed to fetch"), false), next))
	p, _ := h.ob.Status(ctx)
	require.Equal(t, outbox.SendFailure{Kind: outbox.FailureUnreachable, Since: h.clock.Now(), NextAttemptAt: next,
		Error: queue.ErrorInfo{Code: queue.CodeNetwork, Message: "fence: TypeError: Failed to fetch", At: h.clock.Now()}}, p.Failure)
	require.Equal(t, "fence: TypeError: Failed to fetch", p.LastError.Message)
	_, err := h.flush("A")
	require.NoError(t, err)
	p, _ = h.ob.Status(ctx)
	require.True(t, p.Failure.Failing())
	require.NoError(t, h.ob.NoteReached(ctx))
	p, _ = h.ob.Status(ctx)
	require.False(t, p.Failure.Failing())
	require.True(t, p.LastError == nil)
	require.NoError(t, h.ob.NoteReached(ctx)) // nothing to end: no write, no error
}

// A record-level answer (a terminal 4xx) after failures: the server works,
// the spell ends, and LastError is that answer.
func TestRecordAnswerEndsFailure(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("p")})
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 503}, nil }
	_, _ = h.flush("A")
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 422}, nil }
	h.clock.Add(time.Hour)
	_, _ = h.flush("A")
	p, _ := h.ob.Status(ctx)
	require.False(t, p.Failure.Failing())
	require.Equal(t, "http_422", p.LastError.Code)
}

// A record that dead-letters settles: nothing retries it, so the status
// does not say that sending fails, and keeps not saying it with the server
// back and no flush to run. Nor once a discard empties the queue.
func TestStatusNotFailingWhenNothingRetries(t *testing.T) {
	h := newHarness(t, func(c *outbox.Config) { c.MaxAttempts = 2 })
	ctx := context.Background()
	a := h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("p")})
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 503}, nil }
	_, _ = h.flush("A")
	p, _ := h.ob.Status(ctx)
	require.Equal(t, outbox.FailureServerError, p.Failure.Kind) // one attempt left: retried
	h.clock.Add(time.Hour)
	_, _ = h.flush("A")
	require.Equal(t, queue.StatusDeadLetter, h.get(a.ID).Status)
	p, _ = h.ob.Status(ctx)
	require.False(t, p.Failure.Failing())
	require.True(t, p.Failure.NextAttemptAt.IsZero())

	// A failure kept from an earlier flush: hidden once nothing is left to
	// send (a purge empties the queue).
	h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("q")})
	h.clock.Add(time.Hour)
	_, _ = h.flush("A")
	p, _ = h.ob.Status(ctx)
	require.Equal(t, outbox.FailureServerError, p.Failure.Kind)
	_, err := h.ob.Logout(ctx, true)
	require.NoError(t, err)
	p, _ = h.ob.Status(ctx)
	require.Equal(t, 0, p.Pending+p.Failed+p.Sending)
	require.False(t, p.Failure.Failing())
}
