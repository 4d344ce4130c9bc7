package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// ws is a raw realtime connection to the demo server.
type ws struct {
	t *testing.T
	c *websocket.Conn
}

func dialRealtime(t *testing.T, base string, h http.Header) (*ws, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/realtime", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return &ws{t: t, c: c}, resp, nil
}

// join dials as user and says hello at version 0.
func join(t *testing.T, base string, h http.Header) *ws {
	t.Helper()
	c, _, err := dialRealtime(t, base, h)
	require.NoError(t, err)
	c.send(rt.Hello{Protocol: rt.Protocol})
	require.Equal(t, rt.Ready{}, c.recv())
	return c
}

func user(u string) http.Header { return http.Header{server.DemoUserHeader: {u}} }

func (c *ws) send(m rt.Message) {
	c.t.Helper()
	require.NoError(c.t, c.c.Write(context.Background(), websocket.MessageBinary, rt.Encode(m)))
}

func (c *ws) recv() rt.Message {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.c.Read(ctx)
	require.NoError(c.t, err)
	m, err := rt.Decode(b, 0)
	require.NoError(c.t, err)
	return m
}

func (c *ws) delta() (rt.Delta, []server.Change) {
	c.t.Helper()
	m := c.recv()
	d, ok := m.(rt.Delta)
	require.True(c.t, ok, "want a delta, got %#v", m)
	var ch []server.Change
	require.NoError(c.t, json.Unmarshal(d.Changes, &ch), "%s", d.Changes)
	return d, ch
}

func put(id, title string, done bool) rt.Mutation {
	b, _ := json.Marshal(map[string]any{"id": id, "title": title, "done": done})
	return rt.Mutation{ID: "put-" + id, Op: server.OpIssuePut, Entity: "issue", Payload: b}
}

func snapshot(t *testing.T, base, u string) (int, server.Snapshot) {
	t.Helper()
	resp, b := call(t, "GET", base+"/realtime/snapshot", u, "", "")
	var s server.Snapshot
	if resp.StatusCode == 200 {
		require.NoError(t, json.Unmarshal(b, &s), "%s", b)
	}
	return resp.StatusCode, s
}

func testTracker(t *testing.T, db string) {
	hs, _ := newServer(t, db)
	base := hs.URL
	_, resp, err := dialRealtime(t, base, nil)
	require.Error(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the upgrade is authenticated")

	ann := join(t, base, user("ann"))
	annCookie := join(t, base, http.Header{"Cookie": {server.DemoUserCookie + "=ann"}})
	bob := join(t, base, user("bob"))
	before := effects(t, base)

	m := put("i1", "Fix the login", false)
	ann.send(m)
	for _, c := range []*ws{ann, annCookie} {
		d, ch := c.delta()
		require.Equal(t, uint64(1), d.Version)
		require.Len(t, ch, 1)
		require.Equal(t, server.IssueStore, ch[0].Store)
		require.Equal(t, "i1", ch[0].Key)
		require.NotNil(t, ch[0].Value)
		require.Equal(t, "ann", ch[0].Value.By, "by: the session's user")
		require.Greater(t, ch[0].Value.UpdatedAt, int64(0))
		require.Equal(t, server.Issue{ID: "i1", Title: "Fix the login", By: "ann", UpdatedAt: ch[0].Value.UpdatedAt}, *ch[0].Value)
	}
	ack := ann.recv().(rt.Ack)
	require.Equal(t, m.ID, ack.ID)
	require.Equal(t, uint64(200), ack.Status)
	require.Equal(t, before+1, effects(t, base))

	bob.send(rt.Ping{Nonce: 9})
	require.Equal(t, rt.Pong{Nonce: 9}, bob.recv(), "another user's scope sees nothing")

	ann.send(m)
	require.True(t, ann.recv().(rt.Ack).Replayed, "a resend is acked from the record")
	require.Equal(t, before+1, effects(t, base), "and applied once")

	del := rt.Mutation{ID: "del-i1", Op: server.OpIssueDelete, Entity: "issue", Payload: []byte(`{"id":"i1"}`)}
	ann.send(del)
	d, ch := ann.delta()
	require.Equal(t, uint64(2), d.Version)
	require.Equal(t, []server.Change{{Store: server.IssueStore, Key: "i1", Deleted: true}}, ch)
	require.IsType(t, rt.Ack{}, ann.recv())

	ann.send(rt.Mutation{ID: "bad-op", Op: "issue.burn", Entity: "issue", Payload: []byte(`{"id":"i1"}`)})
	rej := ann.recv().(rt.Reject)
	require.Equal(t, uint64(422), rej.Problem.Status)
	require.False(t, rej.Retry)
	ann.send(rt.Mutation{ID: "bad-title", Op: server.OpIssuePut, Entity: "issue", Payload: []byte(`{"id":"i9","title":` + `"` + strings.Repeat("x", 1001) + `"}`)})
	require.Equal(t, uint64(422), ann.recv().(rt.Reject).Problem.Status)

	ann.send(put("i2", "Ship it", true))
	d, _ = ann.delta()
	require.Equal(t, uint64(3), d.Version)
	require.IsType(t, rt.Ack{}, ann.recv())
	bob.send(put("b1", "Bob's own", false))
	d, _ = bob.delta()
	require.Equal(t, uint64(1), d.Version, "each user's stream has its own versions")
	require.IsType(t, rt.Ack{}, bob.recv())

	code, snap := snapshot(t, base, "ann")
	require.Equal(t, 200, code)
	require.Equal(t, uint64(3), snap.Version)
	require.Len(t, snap.Changes, 1)
	require.Equal(t, "i2", snap.Changes[0].Key)
	require.Equal(t, server.Issue{ID: "i2", Title: "Ship it", Done: true, By: "ann", UpdatedAt: snap.Changes[0].Value.UpdatedAt}, *snap.Changes[0].Value)
	code, snap = snapshot(t, base, "bob")
	require.Equal(t, 200, code)
	require.Equal(t, uint64(1), snap.Version)
	require.Equal(t, "b1", snap.Changes[0].Key)
	code, _ = snapshot(t, base, "")
	require.Equal(t, 401, code, "the snapshot is authenticated")

	resp, b := call(t, "POST", base+"/api/signout", "ann", "", "")
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"closed":2}`, string(b))
	for _, c := range []*ws{ann, annCookie} {
		var err error
		for err == nil { // annCookie has deltas 2 and 3 to read first
			_, _, err = c.c.Read(context.Background())
		}
		require.Equal(t, websocket.StatusCode(rt.CloseUnauthorized), websocket.CloseStatus(err), "signed out: 4401")
	}
	bob.send(rt.Ping{Nonce: 10})
	require.Equal(t, rt.Pong{Nonce: 10}, bob.recv(), "another user's socket stays")
}

func TestTrackerSQLite(t *testing.T) { testTracker(t, filepath.Join(t.TempDir(), "t.db")) }

func TestTrackerPostgres(t *testing.T) { testTracker(t, pgtest.SchemaURL(t)) }

// The in-process server of the e2e tests and the bench counts its
// connections, and Close ends them with 1001.
func TestLocalRealtimeStats(t *testing.T) {
	l, err := server.StartLocal(t.TempDir(), nil)
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	a := join(t, l.URL, user("ann"))
	join(t, l.URL, user("ann"))
	require.Equal(t, int64(2), l.RealtimeStats().Open)
	require.Equal(t, int64(2), l.RealtimeStats().Accepted)
	l.Close()
	closed = true
	_, _, err = a.c.Read(context.Background())
	require.Equal(t, websocket.StatusGoingAway, websocket.CloseStatus(err))
}

// Two `tabfence serve` instances on one PostgreSQL: an edit through either
// reaches the tabs on both, in one order.
func TestTrackerTwoInstancesPostgres(t *testing.T) {
	url := pgtest.SchemaURL(t)
	a, _ := newServer(t, url)
	b, _ := newServer(t, url)
	onA, onB := join(t, a.URL, user("ann")), join(t, b.URL, user("ann"))
	onA.send(put("x1", "from A", false))
	onB.send(put("x2", "from B", false))
	for name, c := range map[string]*ws{"A": onA, "B": onB} {
		keys := map[uint64]string{}
		for len(keys) < 2 {
			switch m := c.recv().(type) {
			case rt.Delta:
				var ch []server.Change
				require.NoError(t, json.Unmarshal(m.Changes, &ch))
				keys[m.Version] = ch[0].Key
			case rt.Ack:
			default:
				t.Fatalf("client on %s: unexpected %#v", name, m)
			}
		}
		require.ElementsMatch(t, []string{"x1", "x2"}, []string{keys[1], keys[2]}, "client on %s: versions 1 and 2", name)
	}
}

// A page of another origin may not open the socket (its cookie would
// authenticate it) unless that origin is allowed.
func TestRealtimeUpgradeChecksTheOrigin(t *testing.T) {
	const other = "https://app.example"
	for _, allow := range [][]string{nil, {other}} {
		srv, err := server.New(server.Config{DB: filepath.Join(t.TempDir(), "o.db"), AllowOrigins: allow,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		require.NoError(t, err)
		hs := httptest.NewServer(srv)
		h := user("ann")
		h.Set("Origin", other)
		_, resp, err := dialRealtime(t, hs.URL, h)
		if allow == nil {
			require.Error(t, err)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, "another origin")
		} else {
			require.NoError(t, err, "an allowed origin")
		}
		h.Set("Origin", hs.URL)
		_, _, err = dialRealtime(t, hs.URL, h)
		require.NoError(t, err, "the same origin")
		hs.Close()
		require.NoError(t, srv.Close())
	}
}
