package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

func TestFlushHeadersAndIdempotencyKeyStableAcrossRetries(t *testing.T) {
	h := newHarness(t, nil)
	n := 0
	h.reply = func(outbox.Request) (outbox.Response, error) {
		n++
		switch n {
		case 1:
			return outbox.Response{Status: 503, Header: outbox.Header{"Retry-After": "5"}}, nil
		case 2:
			return outbox.Response{}, errors.New("offline")
		}
		return outbox.Response{Status: 201, Body: []byte("done"), Header: outbox.Header{wire.HeaderReplayed: "true"}}, nil
	}
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	_, err := h.flush("A")
	require.NoError(t, err)
	r := h.get(a.ID)
	require.Equal(t, queue.StatusFailed, r.Status)
	require.True(t, !r.NextAttemptAt.Before(t0.Add(5*time.Second))) // Retry-After floor
	h.clock.Add(time.Hour)
	_, _ = h.flush("A")
	h.clock.Add(time.Hour)
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 1, rep.Acked)
	r = h.get(a.ID)
	require.Equal(t, queue.StatusAcked, r.Status)
	require.Equal(t, "done", string(r.Response.Body))
	require.True(t, r.Response.Replayed)
	require.Equal(t, 3, r.Attempts)
	reqs := h.sent()
	require.Len(t, reqs, 3)
	for _, q := range reqs {
		require.Equal(t, wire.FormatIdempotencyKey(r.IdempotencyKey), q.Header.Get(wire.HeaderIdempotencyKey))
		require.Equal(t, a.ID, q.Header.Get(wire.HeaderOperationID))
		require.Equal(t, "outbox:test", q.Header.Get(wire.HeaderResource))
		require.Equal(t, "p", string(q.Body))
		require.Equal(t, "/api/commands", q.Endpoint)
	}
	// the fencing token is the owner's: a new owner's requests carry a higher one
	t1, _ := wire.ParseToken(reqs[0].Header.Get(wire.HeaderFencingToken))
	t3, _ := wire.ParseToken(reqs[2].Header.Get(wire.HeaderFencingToken))
	require.True(t, t3 > t1)
}

func TestTerminalNotRetriedAndBlocksEntity(t *testing.T) {
	h := newHarness(t, nil)
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		if string(r.Body) == "bad" {
			return outbox.Response{Status: 422}, nil
		}
		return outbox.Response{Status: 200}, nil
	}
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("bad")})
	b := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("good")})
	c := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "m", Payload: []byte("good")})
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 1, rep.Terminal)
	require.Equal(t, queue.StatusTerminalFailed, h.get(a.ID).Status)
	require.Equal(t, "http_422", h.get(a.ID).LastError.Code)
	require.Equal(t, queue.StatusPending, h.get(b.ID).Status) // blocked behind a
	require.Equal(t, queue.StatusAcked, h.get(c.ID).Status)
	h.clock.Add(time.Hour)
	_, _ = h.flush("A")
	require.Len(t, h.sent(), 2) // never retried
	dl, _ := h.ob.DeadLetters(context.Background())
	require.Len(t, dl, 1)
	require.NoError(t, h.ob.Discard(context.Background(), a.ID))
	require.ErrorIs(t, h.ob.Discard(context.Background(), b.ID), queue.ErrInvalidTransition)
	_, _ = h.flush("A")
	require.Equal(t, queue.StatusAcked, h.get(b.ID).Status)
}

func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	h := newHarness(t, func(c *outbox.Config) { c.MaxAttempts = 3 })
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 500}, nil }
	a := h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("p")})
	for i := 0; i < 10; i++ {
		_, _ = h.flush("A")
		h.clock.Add(time.Hour)
	}
	require.Equal(t, queue.StatusDeadLetter, h.get(a.ID).Status)
	require.Len(t, h.sent(), 3)
	var dead int
	for _, e := range h.events {
		if e.Kind == outbox.EventDeadLetter {
			dead++
		}
	}
	require.Equal(t, 1, dead)
	p, _ := h.ob.Status(context.Background())
	require.Equal(t, 1, p.DeadLetter)
	require.Equal(t, "http_500", p.LastError.Code)
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 200}, nil }
	require.NoError(t, h.ob.Retry(context.Background(), a.ID))
	_, _ = h.flush("A")
	require.Equal(t, queue.StatusAcked, h.get(a.ID).Status)
}

func TestConflictIsVisibleAndResolvable(t *testing.T) {
	h := newHarness(t, nil)
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{Status: 409, Body: []byte(wire.ProblemConflict)}, nil
	}
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	_, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, queue.StatusConflict, h.get(a.ID).Status)
	p, _ := h.ob.Status(context.Background())
	require.Equal(t, 1, p.Conflict)
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 200}, nil }
	require.NoError(t, h.ob.Retry(context.Background(), a.ID))
	_, _ = h.flush("A")
	require.Equal(t, queue.StatusAcked, h.get(a.ID).Status)
}

func TestAuthPausesUserAndDoesNotCharge(t *testing.T) {
	var asked []string
	h := newHarness(t, func(c *outbox.Config) { c.OnAuthRequired = func(u string) { asked = append(asked, u) } })
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 401}, nil }
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	b := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "m", Payload: []byte("p")})
	_, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrAuthRequired)
	require.Equal(t, []string{"alice"}, asked)
	r := h.get(a.ID)
	require.Equal(t, queue.StatusPending, r.Status)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, queue.StatusPending, h.get(b.ID).Status) // released, never sent
	_, err = h.flush("A")
	require.ErrorIs(t, err, outbox.ErrPaused)
	require.Len(t, h.sent(), 1)
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 200}, nil }
	require.NoError(t, h.ob.Resume(context.Background()))
	_, err = h.flush("A")
	require.NoError(t, err)
	require.Equal(t, queue.StatusAcked, h.get(a.ID).Status)
	require.Equal(t, queue.StatusAcked, h.get(b.ID).Status)
}

func TestStaleFencingTokenStepsDown(t *testing.T) {
	h := newHarness(t, nil)
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{Status: 409, Header: outbox.Header{wire.HeaderFencingHighest: "99"}}, nil
	}
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	_, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrStepDown)
	var sd *outbox.StepDownError
	require.True(t, errors.As(err, &sd))
	require.Equal(t, uint64(99), sd.Highest)
	r := h.get(a.ID)
	require.Equal(t, queue.StatusPending, r.Status)
	require.Equal(t, 0, r.Attempts)
}

func TestStaleOwnerChangesNothing(t *testing.T) {
	h := newHarness(t, nil)
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	old := h.lease("A")
	var stolen queue.Lease
	h.reply = func(outbox.Request) (outbox.Response, error) {
		// while A's request is on the wire, B steals the lock
		stolen = h.lease("B")
		return outbox.Response{Status: 200}, nil
	}
	_, err := h.ob.Flush(context.Background(), old)
	require.ErrorIs(t, err, queue.ErrStaleOwner)
	r := h.get(a.ID)
	require.Equal(t, queue.StatusSending, r.Status) // A could not ack
	require.Equal(t, old.Token, r.LeaseToken)
	// B recovers it at once: it was leased under a superseded token, so its
	// owner can change nothing (no need to wait for the record lease to
	// expire, which would stall the queue behind a frozen owner); the resend
	// is safe (same idempotency key)
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{Status: 200, Header: outbox.Header{wire.HeaderReplayed: "true"}}, nil
	}
	_, err = h.ob.Flush(context.Background(), stolen)
	require.NoError(t, err)
	r = h.get(a.ID)
	require.Equal(t, queue.StatusAcked, r.Status)
	require.Equal(t, 2, r.Attempts)
	// A's old lease can neither claim nor update
	_, err = h.store.Claim(context.Background(), queue.ClaimRequest{Lease: old, Now: h.clock.Now(), Limit: 1, UserID: "alice"})
	require.ErrorIs(t, err, queue.ErrStaleOwner)
}

func TestFallbackLeaseHeld(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	a, err := h.ob.Acquire(ctx, "A", false)
	require.NoError(t, err)
	_, err = h.ob.Acquire(ctx, "B", false)
	require.ErrorIs(t, err, queue.ErrLeaseHeld)
	require.NoError(t, h.ob.Release(ctx, a))
	b, err := h.ob.Acquire(ctx, "B", false)
	require.NoError(t, err)
	require.True(t, b.Token > a.Token)
}

func TestMigrations(t *testing.T) {
	h := newHarness(t, func(c *outbox.Config) {
		c.SchemaVersion = 3
		c.Migrations = []queue.Migration{
			{From: 1, To: 2, Migrate: func(p []byte) ([]byte, error) { return append(p, "+v2"...), nil }},
			{From: 2, To: 3, Migrate: func(p []byte) ([]byte, error) { return append(p, "+v3"...), nil }},
		}
	})
	ctx := context.Background()
	mk := func(id string, ver int) {
		_, err := h.store.Enqueue(ctx, queue.EnqueueRequest{Policy: queue.Policy{Dedupe: queue.Append}, Record: queue.Record{
			ID: id, IdempotencyKey: "k" + id, EntityID: id, OperationType: "comment", Payload: []byte("p"),
			PayloadSchemaVersion: ver, UserID: "alice", TenantID: "t1", MaxAttempts: 5, CreatedAt: t0,
		}})
		require.NoError(t, err)
	}
	mk("v1", 1)
	mk("v0", 0)
	mk("v9", 9)
	_, err := h.flush("A")
	require.NoError(t, err)
	// v0 (no version) is schema 1: both migrated at the send, the stored
	// records untouched.
	for i, id := range []string{"v1", "v0"} {
		require.Equal(t, queue.StatusAcked, h.get(id).Status, id)
		require.Equal(t, "p+v2+v3", string(h.sent()[i].Body), id)
		require.Equal(t, "p", string(h.get(id).Payload), id)
	}
	// v9 is newer: left alone, uncharged, never terminal (a build that
	// knows it sends it).
	newer := h.get("v9")
	require.Equal(t, queue.StatusPending, newer.Status)
	require.Equal(t, 0, newer.Attempts)
	require.Len(t, h.sent(), 2)
	p, _ := h.ob.Status(ctx)
	require.Equal(t, 1, p.Unsupported)
	unsup, err := h.ob.Unsupported(ctx)
	require.NoError(t, err)
	require.Len(t, unsup, 1)
}

func TestLogoutPauseAndPurge(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	a := h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("alice's")})
	_, _ = h.ob.Logout(ctx, false)
	h.ob.Login(context.Background(), outbox.Session{UserID: "bob", TenantID: "t1"})
	b := h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("bob's")})
	_, err := h.flush("A")
	require.NoError(t, err)
	require.Len(t, h.sent(), 1)
	require.Equal(t, "bob's", string(h.sent()[0].Body))
	require.Equal(t, "bob", h.sent()[0].UserID)
	require.Equal(t, queue.StatusPending, h.get(a.ID).Status) // kept, not sent under bob
	require.Equal(t, queue.StatusAcked, h.get(b.ID).Status)
	h.ob.Login(context.Background(), outbox.Session{UserID: "alice", TenantID: "t1"})
	n, err := h.ob.Logout(ctx, true)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = h.store.Get(ctx, a.ID)
	require.ErrorIs(t, err, outbox.ErrNotFound)
}

func TestAppPause(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	h.enqueue(outbox.Op{OperationType: "comment", Payload: []byte("p")})
	require.NoError(t, h.ob.Pause(ctx))
	_, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrPaused)
	require.NoError(t, h.ob.Resume(ctx))
	_, err = h.flush("A")
	require.NoError(t, err)
	require.Len(t, h.sent(), 1)
}

func TestBoundedConcurrencyAcrossEntities(t *testing.T) {
	var cur, peak atomic.Int32
	var mu sync.Mutex
	order := map[string][]string{}
	h := newHarness(t, func(c *outbox.Config) { c.Concurrency = 3; c.BatchSize = 100 })
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		cur.Add(-1)
		mu.Lock()
		e := string(r.Body[:2])
		order[e] = append(order[e], string(r.Body))
		mu.Unlock()
		return outbox.Response{Status: 200}, nil
	}
	for i := 0; i < 5; i++ {
		for e := 0; e < 8; e++ {
			h.enqueue(outbox.Op{OperationType: "comment", EntityID: "e" + strconv.Itoa(e), Payload: []byte("e" + strconv.Itoa(e) + "#" + strconv.Itoa(i))})
		}
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 40, rep.Acked)
	require.True(t, peak.Load() <= 3 && peak.Load() >= 2, peak.Load())
	for e, got := range order {
		for i, b := range got {
			require.Equal(t, e+"#"+strconv.Itoa(i), b) // per-entity order kept
		}
	}
}

func TestFlushDeadlineReleasesUnsent(t *testing.T) {
	h := newHarness(t, func(c *outbox.Config) { c.MaxFlushDuration = 10 * time.Second })
	h.reply = func(outbox.Request) (outbox.Response, error) {
		h.clock.Add(4 * time.Second)
		return outbox.Response{Status: 200}, nil
	}
	for i := 0; i < 5; i++ {
		h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 3, rep.Acked)
	require.Equal(t, 2, rep.Released)
	require.True(t, rep.More) // stopped by the deadline: the caller goes on at once
	p, _ := h.ob.Status(context.Background())
	require.Equal(t, 2, p.Pending)
	require.Equal(t, 0, p.Sending)
	require.Equal(t, 12*time.Second, p.OldestPendingAge)
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 200}, nil }
	rep, err = h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 2, rep.Acked)
	require.False(t, rep.More) // drained: nothing due is left
}

func TestEventsNeverCarryPayload(t *testing.T) {
	h := newHarness(t, nil)
	h.enqueue(outbox.Op{OperationType: "comment", OperationKey: "secret-key", Payload: []byte("secret-payload")})
	_, _ = h.flush("A")
	require.True(t, len(h.events) >= 4)
	for _, e := range h.events {
		s := e.RecordID + e.OperationKeyHash + e.Reason + e.ErrorCode + e.Owner
		require.False(t, stringsContains(s, "secret"), e)
	}
}

func stringsContains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// Offline (the device has no network): the failed send is not charged, the
// flush stops and hands the rest back unsent, and nothing backs off — the
// queue is due again as soon as the network returns.
func TestOfflineSendNotChargedAndStopsFlush(t *testing.T) {
	h := newHarness(t, nil)
	offline := true
	h.reply = func(outbox.Request) (outbox.Response, error) {
		if offline {
			return outbox.Response{}, errors.Join(outbox.ErrOffline, errors.New("TypeError: Failed to fetch"))
		}
		return outbox.Response{Status: 200}, nil
	}
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	b := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "m", Payload: []byte("p")})
	rep, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrOffline)
	require.Len(t, h.sent(), 1) // the first failure stops the flush
	require.Equal(t, 0, rep.Retried)
	for _, id := range []string{a.ID, b.ID} {
		r := h.get(id)
		require.Equal(t, queue.StatusPending, r.Status, id)
		require.Equal(t, 0, r.Attempts, id)
		require.False(t, r.NextAttemptAt.After(h.clock.Now()), id) // due: no backoff
	}
	require.Equal(t, queue.CodeOffline, h.get(a.ID).LastError.Code)
	kinds := map[outbox.EventKind]int{}
	for _, e := range h.events {
		kinds[e.Kind]++
	}
	require.Equal(t, 1, kinds[outbox.EventOffline])
	require.Equal(t, 0, kinds[outbox.EventRetry])
	offline = false
	_, err = h.flush("A")
	require.NoError(t, err)
	require.Equal(t, queue.StatusAcked, h.get(a.ID).Status)
	require.Equal(t, 1, h.get(a.ID).Attempts)
	require.Equal(t, queue.StatusAcked, h.get(b.ID).Status)
}

// A network failure while the browser believed it was online (server
// unreachable) is charged and backs off; when the device reconnects, the
// backoff it earned ends and the record goes at the next flush. A backoff
// the receiver asked for (503) is kept.
func TestReconnectedEndsNetworkBackoff(t *testing.T) {
	h := newHarness(t, nil)
	fail := map[string]error{}
	status := map[string]int{}
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		if err := fail[r.RecordID]; err != nil {
			return outbox.Response{}, err
		}
		if s := status[r.RecordID]; s != 0 {
			return outbox.Response{Status: s}, nil
		}
		return outbox.Response{Status: 200}, nil
	}
	a := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	b := h.enqueue(outbox.Op{OperationType: "comment", EntityID: "m", Payload: []byte("p")})
	fail[a.ID] = errors.New("TypeError: Failed to fetch")
	status[b.ID] = 503
	_, err := h.flush("A")
	require.NoError(t, err)
	for _, id := range []string{a.ID, b.ID} {
		r := h.get(id)
		require.Equal(t, queue.StatusFailed, r.Status, id)
		require.Equal(t, 1, r.Attempts, id)
		require.True(t, r.NextAttemptAt.After(h.clock.Now()), id)
	}
	delete(fail, a.ID)
	delete(status, b.ID)
	h.clock.Add(time.Millisecond)
	_, err = h.flush("A") // nothing due yet
	require.NoError(t, err)
	require.Len(t, h.sent(), 2)
	h.ob.Reconnected()
	_, err = h.flush("A")
	require.NoError(t, err)
	require.Equal(t, queue.StatusAcked, h.get(a.ID).Status) // its backoff ended
	require.Equal(t, 2, h.get(a.ID).Attempts)
	require.Equal(t, queue.StatusFailed, h.get(b.ID).Status) // the server's backoff is kept
	require.Len(t, h.sent(), 3)
}
