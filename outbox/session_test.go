package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// cookieServer models a receiver behind cookie credentials: the browser's
// current user (the cookie) is who a request is stored for, whichever tab
// sent it. With check it refuses a request whose X-Client-User is another
// user (the receiver's session check).
type cookieServer struct {
	mu     sync.Mutex
	cookie string
	check  bool
	stored map[string][]string // user -> record ids stored as theirs
	sent   int
	onSend func(n int) // after the n-th request is answered (1-based)
}

func (s *cookieServer) send(_ context.Context, r outbox.Request) (outbox.Response, error) {
	s.mu.Lock()
	s.sent++
	n, user := s.sent, s.cookie
	resp := outbox.Response{Status: 201}
	if s.check && r.Header[wire.HeaderClientUser] != wire.FormatClientUser(user) {
		resp = outbox.Response{Status: 403, Body: []byte(`{"type":"` + wire.ProblemSessionMismatch + `"}`)}
	} else {
		s.stored[user] = append(s.stored[user], r.RecordID)
	}
	hook := s.onSend
	s.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return resp, nil
}

func (s *cookieServer) storedAs(user string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.stored[user]...)
}

// twoTabs is one queue (one store) with two tabs' handles on it: tab 1
// flushes, tab 2 switches the session.
func twoTabs(t *testing.T, srv *cookieServer, batch int) (h *harness, tab2 *outbox.Outbox) {
	h = newHarness(t, func(c *outbox.Config) {
		c.Transport = outbox.TransportFunc(srv.send)
		c.BatchSize = batch
	})
	cfg := *h.ob.ConfigForTest()
	cfg.Events = nil
	tab2, err := outbox.New(cfg)
	require.NoError(t, err)
	_, err = tab2.JoinSession(context.Background())
	require.NoError(t, err)
	require.Equal(t, "alice", tab2.Session().UserID) // the session is the queue's
	return h, tab2
}

func (h *harness) enqueueN(n int, text string) []string {
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, h.enqueue(outbox.Op{OperationType: "comment", EntityID: "doc", Payload: []byte(text)}).ID)
	}
	return ids
}

// switchTo is what a tab does on a switch of user: the cookie changes
// (the server's login answer), then the tab logs the outbox out and in.
func switchTo(t *testing.T, srv *cookieServer, tab *outbox.Outbox, user string) outbox.Session {
	srv.mu.Lock()
	srv.cookie = user
	srv.mu.Unlock()
	ctx := context.Background()
	_, err := tab.Logout(ctx, false)
	require.NoError(t, err)
	s, err := tab.Login(ctx, outbox.Session{UserID: user, TenantID: "t1"})
	require.NoError(t, err)
	return s
}

// Another tab switches the user while this tab's flush is in flight, and
// announces it: the flush stops before its next send, nothing of alice's
// is stored as bob's, the rest stays pending and uncharged for alice, and
// once alice is back each of her records is stored once, as hers.
func TestSessionSwitchInAnotherTabStopsTheFlush(t *testing.T) {
	for _, hint := range []bool{true, false} {
		name := "announced"
		if !hint {
			name = "announcement lost"
		}
		t.Run(name, func(t *testing.T) {
			srv := &cookieServer{cookie: "alice", check: true, stored: map[string][]string{}}
			h, tab2 := twoTabs(t, srv, 50)
			ids := h.enqueueN(20, "alice's")
			srv.onSend = func(n int) {
				if n == 3 {
					s := switchTo(t, srv, tab2, "bob")
					if hint {
						h.ob.NoteSession(s.AuthGeneration) // the channel
					}
				}
			}
			_, err := h.flush("A")
			if hint {
				require.ErrorIs(t, err, outbox.ErrSessionChanged)
				require.Equal(t, 3, srv.sent) // no send after the announcement
			} else {
				// Without the announcement the flush sends on until the
				// receiver refuses the first record as not bob's.
				require.ErrorIs(t, err, outbox.ErrSessionMismatch)
				require.Equal(t, 4, srv.sent)
			}
			require.Len(t, srv.storedAs("bob"), 0)
			require.Len(t, srv.storedAs("alice"), 3)
			for _, id := range ids[3:] {
				r := h.get(id)
				require.Equal(t, queue.StatusPending, r.Status, id)
				require.Equal(t, 0, r.Attempts, id)
				require.Equal(t, "alice", r.UserID)
			}
			// The session is bob's now in tab 1 too: it reads it before
			// its next flush, and sends nothing of alice's.
			_, err = h.flush("A")
			require.ErrorIs(t, err, outbox.ErrSessionChanged)
			require.Equal(t, "bob", h.ob.QueueSession().UserID)
			require.Equal(t, "alice", h.ob.Session().UserID) // its own records stay alice's
			_, err = h.flush("A")
			require.NoError(t, err)
			require.Len(t, srv.storedAs("bob"), 0)
			// Back to alice: her records arrive, once each, as hers.
			srv.onSend = nil
			switchTo(t, srv, tab2, "alice")
			_, _ = h.flush("A") // adopts alice
			_, err = h.flush("A")
			require.NoError(t, err)
			got := srv.storedAs("alice")
			require.Equal(t, strings.Join(ids, ","), strings.Join(got, ","))
			require.Len(t, srv.storedAs("bob"), 0)
		})
	}
}

// The credentials changed and the page has not logged the outbox in as the
// new user (yet): the receiver refuses alice's first record, and her records
// are held, not resent in a loop, until the next login.
func TestSessionMismatchHoldsTheUserUntilLogin(t *testing.T) {
	srv := &cookieServer{cookie: "bob", check: true, stored: map[string][]string{}}
	h, tab2 := twoTabs(t, srv, 50)
	ids := h.enqueueN(5, "alice's")
	_, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrSessionMismatch)
	require.Equal(t, 1, srv.sent)
	r := h.get(ids[0])
	require.Equal(t, queue.StatusPending, r.Status) // not terminal, not dead, not charged
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, outbox.CodeSessionMismatch, r.LastError.Code)
	p, err := h.ob.Status(context.Background())
	require.NoError(t, err)
	require.Equal(t, "alice", p.SessionHeld)
	for i := 0; i < 3; i++ {
		_, err = h.flush("A")
		require.ErrorIs(t, err, outbox.ErrSessionMismatch)
	}
	require.Equal(t, 1, srv.sent) // held: nothing resent
	switchTo(t, srv, tab2, "alice")
	_, _ = h.flush("A") // adopts the new session
	_, err = h.flush("A")
	require.NoError(t, err)
	require.Equal(t, strings.Join(ids, ","), strings.Join(srv.storedAs("alice"), ","))
}

// A bogus announcement (a generation never written) stops at most the
// flush in flight, not every flush after it.
func TestSessionBogusAnnouncementIsForgotten(t *testing.T) {
	srv := &cookieServer{cookie: "alice", check: true, stored: map[string][]string{}}
	h, _ := twoTabs(t, srv, 50)
	h.enqueueN(3, "alice's")
	h.ob.NoteSession(1 << 40)
	_, err := h.flush("A")
	require.NoError(t, err)
	require.Len(t, srv.storedAs("alice"), 3)
}

func TestNextSession(t *testing.T) {
	a1 := outbox.Session{UserID: "a", AuthGeneration: 1}
	require.Equal(t, a1, outbox.NextSession(a1, outbox.Session{UserID: "a"}))
	require.Equal(t, outbox.Session{UserID: "b", AuthGeneration: 2}, outbox.NextSession(a1, outbox.Session{UserID: "b"}))
	require.Equal(t, outbox.Session{AuthGeneration: 2}, outbox.NextSession(a1, outbox.Session{}))
	require.Equal(t, outbox.Session{UserID: "a", AuthGeneration: 7}, outbox.NextSession(a1, outbox.Session{UserID: "a", AuthGeneration: 7}))
	require.Equal(t, outbox.Session{UserID: "a", TenantID: "t", AuthGeneration: 2}, outbox.NextSession(a1, outbox.Session{UserID: "a", TenantID: "t"}))
}
