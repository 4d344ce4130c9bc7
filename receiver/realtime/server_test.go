package realtime_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver/realtime"
	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

func TestHelloReadyAndCatchUp(t *testing.T) {
	e := newEnv(t, realtime.Options{})
	ctx := context.Background()
	require.Equal(t, rt.Ready{Version: 0}, e.dial("u1").hello(0))
	for i := 0; i < 3; i++ {
		_, err := e.srv.Publish(ctx, "u1", []byte("c"+strconv.Itoa(i)))
		require.NoError(t, err)
	}
	_, err := e.srv.Publish(ctx, "u2", []byte("other user"))
	require.NoError(t, err)

	c := e.dial("u1")
	require.Equal(t, rt.Ready{Version: 3}, c.hello(1))
	for v := uint64(2); v <= 3; v++ {
		d := c.must().(rt.Delta)
		require.Equal(t, v, d.Version, "the deltas after the client's version, in order")
		require.Equal(t, v-1, d.Prev)
	}
	require.Equal(t, rt.Ready{Version: 3, Reset: true}, e.dial("u1").hello(9), "a client ahead of the feed reloads")
	require.Equal(t, rt.Ready{Version: 1}, e.dial("u2").hello(1), "scopes have their own streams")
}

func TestDeltasFanOutInOrder(t *testing.T) {
	e := newEnv(t, realtime.Options{})
	var cs []*client
	for i := 0; i < 4; i++ {
		c := e.dial("u1")
		c.hello(0)
		cs = append(cs, c)
	}
	const n = 50
	go func() {
		for i := 1; i <= n; i++ {
			_, _ = e.srv.Publish(context.Background(), "u1", []byte("d"+strconv.Itoa(i)))
		}
	}()
	for _, c := range cs {
		for v := uint64(1); v <= n; v++ {
			d := c.must().(rt.Delta)
			require.Equal(t, rt.Delta{Version: v, Prev: v - 1, Changes: []byte("d" + strconv.Itoa(int(v)))}, d)
		}
	}
	assert.Equal(t, int64(4), e.srv.Stats().Open)
}

// The next leader resends a mutation the previous one already sent: the
// server applies it once and answers the resend with the stored ack.
func TestMutationSentTwiceIsAppliedOnce(t *testing.T) {
	e := newEnv(t, realtime.Options{})
	old, next := e.dial("u1"), e.dial("u1")
	old.hello(0)
	next.hello(0)
	m := rt.Mutation{ID: "m-1", Op: "create", Entity: "note", Payload: []byte(`{"body":"hi"}`)}
	old.send(m)
	require.Equal(t, rt.Delta{Version: 1, Prev: 0, Changes: m.Payload}, old.must())
	require.Equal(t, rt.Ack{ID: "m-1", Status: 201, Result: []byte(`{"ok":true}`)}, old.must())
	require.Equal(t, rt.Delta{Version: 1, Prev: 0, Changes: m.Payload}, next.must())

	next.send(m)
	require.Equal(t, rt.Ack{ID: "m-1", Status: 201, Replayed: true, Result: []byte(`{"ok":true}`)}, next.must())
	require.Equal(t, 1, e.notes("u1"))
	_, err := e.srv.Publish(context.Background(), "u1", []byte("marker"))
	require.NoError(t, err)
	require.Equal(t, []byte("marker"), next.must().(rt.Delta).Changes, "the replay published no second delta")

	m.Payload = []byte(`{"body":"other"}`)
	next.send(m)
	rej := next.must().(rt.Reject)
	require.Equal(t, wire.ProblemKeyReuse, rej.Problem.Type)
	require.False(t, rej.Retry)
}

func TestStaleTokenRejected(t *testing.T) {
	e := newEnv(t, realtime.Options{})
	ctx := context.Background()
	t1, err := e.rc.IssueToken(ctx, "u1", "replica")
	require.NoError(t, err)
	t2, err := e.rc.IssueToken(ctx, "u1", "replica")
	require.NoError(t, err)
	c := e.dial("u1")
	c.hello(0)
	c.send(rt.Mutation{ID: "new", Op: "create", Entity: "note", Payload: []byte("a"), Resource: "replica", Token: t2})
	c.must() // its delta
	require.IsType(t, rt.Ack{}, c.must())
	c.send(rt.Mutation{ID: "old", Op: "create", Entity: "note", Payload: []byte("b"), Resource: "replica", Token: t1})
	rej := c.must().(rt.Reject)
	require.Equal(t, "old", rej.ID)
	require.Equal(t, wire.ProblemStaleToken, rej.Problem.Type)
	require.Equal(t, t2, rej.Problem.Highest)
	require.Equal(t, uint64(409), rej.Problem.Status)
	require.False(t, rej.Retry, "a stale leader steps down; it does not retry")
	require.Equal(t, 1, e.notes("u1"))
}

func TestBadInputClosesTyped(t *testing.T) {
	e := newEnv(t, realtime.Options{MaxMessage: 1024})
	cases := map[string]struct {
		send func(c *client)
		want websocket.StatusCode
	}{
		"garbage":           {func(c *client) { c.sendRaw([]byte{0xee, 1, 2}) }, rt.CloseMalformed},
		"mutation bad id":   {func(c *client) { c.sendRaw(append([]byte{byte(rt.TypeMutation), 2}, `a"`...)) }, rt.CloseMalformed},
		"ready from client": {func(c *client) { c.send(rt.Ready{}) }, rt.CloseMalformed},
		"oversized": {func(c *client) {
			c.send(rt.Mutation{ID: "big", Op: "create", Entity: "note", Payload: bytes.Repeat([]byte("x"), 2048)})
		}, websocket.StatusMessageTooBig},
		"text frame": {func(c *client) {
			require.NoError(t, c.c.Write(context.Background(), websocket.MessageText, rt.Encode(rt.Ping{Nonce: 1})))
		}, rt.CloseMalformed},
	}
	for name, tc := range cases {
		c := e.dial("u1")
		c.hello(0)
		tc.send(c)
		assert.Equal(t, tc.want, c.closeCode(), name)
	}
	c := e.dial("u1")
	c.send(rt.Ping{Nonce: 1})
	assert.Equal(t, websocket.StatusCode(rt.CloseMalformed), c.closeCode(), "the first message must be hello")
	c = e.dial("u1")
	c.send(rt.Hello{Protocol: rt.Protocol + 1})
	er := c.must().(rt.Error)
	assert.Equal(t, uint64(426), er.Problem.Status)
	assert.Equal(t, websocket.StatusCode(rt.CloseProtocol), c.closeCode())

	c = e.dial("u1")
	c.send(rt.Hello{Protocol: rt.Protocol, User: "u2"})
	er = c.must().(rt.Error)
	assert.Equal(t, wire.ProblemSessionMismatch, er.Problem.Type, "u2's replica on u1's credentials")
	assert.Equal(t, websocket.StatusCode(rt.CloseSession), c.closeCode())
	require.Equal(t, rt.Ready{}, e.dial("u1").hello(0))

	assert.Equal(t, 0, e.notes("u1"), "nothing stored")
	waitFor(t, "every bad connection counted", func() bool { return e.srv.Stats().Malformed == 6 })

	_, resp, err := websocket.Dial(context.Background(), e.url, nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the upgrade is authenticated")
}

func TestSlowConsumerDisconnected(t *testing.T) {
	e := newEnv(t, realtime.Options{SendBuffer: 4})
	slow := e.dial("u1")
	slow.hello(0)
	big := bytes.Repeat([]byte("x"), 32<<10)
	for i := 0; i < 4000 && e.srv.Stats().Slow == 0; i++ {
		_, err := e.srv.Publish(context.Background(), "u1", big)
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), e.srv.Stats().Slow, "a client that does not read is dropped, not buffered for")
	assert.Equal(t, websocket.StatusCode(rt.CloseSlow), slow.closeCode())
	waitFor(t, "the connection is gone", func() bool { return e.srv.Stats().Open == 0 })
}

func TestPingPongAndIdle(t *testing.T) {
	e := newEnv(t, realtime.Options{IdleTimeout: 300 * time.Millisecond})
	c := e.dial("u1")
	c.hello(0)
	c.send(rt.Ping{Nonce: 7})
	require.Equal(t, rt.Pong{Nonce: 7}, c.must())
	require.Equal(t, websocket.StatusCode(rt.CloseIdle), c.closeCode(), "a client that stops pinging is closed")
	assert.Equal(t, int64(1), e.srv.Stats().Idle)
}

func TestShutdownClosesGoingAway(t *testing.T) {
	e := newEnv(t, realtime.Options{})
	c := e.dial("u1")
	c.hello(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.srv.Shutdown(ctx) }()
	require.Equal(t, websocket.StatusGoingAway, c.closeCode())
	require.NoError(t, <-done)
	_, resp, err := websocket.Dial(context.Background(), e.url, &websocket.DialOptions{HTTPHeader: http.Header{"X-User": {"u1"}}})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(resp.Status, "503"))
}

// Signing a user out ends their open sockets with 4401 (an open socket is
// not authenticated again); other users' stay.
func TestEndSessionClosesTheScopesSockets(t *testing.T) {
	e := newEnv(t, realtime.Options{})
	a1, a2, b := e.dial("u1"), e.dial("u1"), e.dial("u2")
	a1.hello(0)
	a2.hello(0)
	b.hello(0)
	require.Equal(t, 2, e.srv.EndSession("u1"))
	assert.Equal(t, websocket.StatusCode(rt.CloseUnauthorized), a1.closeCode())
	assert.Equal(t, websocket.StatusCode(rt.CloseUnauthorized), a2.closeCode())
	b.send(rt.Ping{Nonce: 3})
	require.Equal(t, rt.Pong{Nonce: 3}, b.must())
	waitFor(t, "u1's connections gone", func() bool { return e.srv.Stats().Open == 1 })
	require.Equal(t, 0, e.srv.EndSession("u1"))
}
