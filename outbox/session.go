package outbox

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/outbox/queue"
)

// The session rule. A queue is shared by every tab of an origin, and so are
// credentials such as cookies: they follow the browser, not the tab. So what
// is sent is decided by the queue's session, not a tab's: Login and Logout
// write it into the Store's metadata (Meta.Session), every change with a
// higher AuthGeneration, and
//
//   - a record is enqueued under the session of its tab (the user the
//     tab's page last logged in as; a tab that opens without one takes the
//     queue's), and is sendable only under that session: same user and
//     tenant (sessionMatches). A tab that has not caught up with another
//     tab's login keeps writing its own user's records, which wait for that
//     user. The generation is not part of the match: a user's records wait
//     through another user's session and are sent when that user logs in
//     again;
//   - the flush owner reads the durable session before every claim; a
//     session other than the one its flush started under ends the flush
//     (ErrSessionChanged) before the next claim, and the records stay,
//     unsent, for their user;
//   - a tab that changes the session announces the new generation (never a
//     token) to the other tabs (NoteSession). The announcement is a hint: a
//     flush that hears of a newer generation stops before its next send, and
//     the tab then reads the durable session (SyncSession); the hint itself
//     never sets a session;
//   - the receiver, which knows the user it authenticated, refuses a record
//     sent for another user (403 session-mismatch): a tab that has not heard
//     of the change yet cannot store one user's records under another's
//     account. The refused record is handed back uncharged, and the user's
//     records are held (Meta.SessionHeld) until the next Login, so a page
//     whose credentials changed without a Login does not resend them in a
//     loop.

// Session is the logged-in user the queue sends for. Records of any other
// user are never sent.
type Session struct {
	UserID         string
	TenantID       string
	AuthGeneration uint64
}

// ErrSessionMismatch: the receiver answered 403 session-mismatch (the
// credentials the request carried are another user's). The record is back in
// the queue, uncharged, and its user's records are held until the next Login.
var ErrSessionMismatch = errors.New("outbox: the receiver authenticated another user than the record's")

// CodeSessionMismatch is the ErrorInfo code of a record the receiver refused
// as another user's.
const CodeSessionMismatch = "session_mismatch"

// sessionMatches reports whether r may be sent under s.
func sessionMatches(r *queue.Record, s Session) bool {
	return s.UserID != "" && r.UserID == s.UserID && r.TenantID == s.TenantID
}

// NextSession is the queue's session after a login as s (a logout is a login
// as the zero Session) when cur is the current one: cur itself when s is the
// same user and tenant at no newer generation, else s at a generation above
// cur's.
func NextSession(cur, s Session) Session {
	if s.UserID == cur.UserID && s.TenantID == cur.TenantID && s.AuthGeneration <= cur.AuthGeneration {
		return cur
	}
	s.AuthGeneration = max(s.AuthGeneration, cur.AuthGeneration+1)
	return s
}

// Login makes s this tab's session and the queue's, for every tab: it is
// written to the Store (with a new generation unless s is already the
// session) and no user's records are held any more. The caller announces the
// generation to the other tabs (NoteSession). It returns the session as
// written.
func (o *Outbox) Login(ctx context.Context, s Session) (Session, error) {
	m, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
		m.Session = NextSession(m.Session, s)
		m.SessionHeld = ""
		return nil
	})
	if err != nil {
		return Session{}, err
	}
	o.setOwn(m.Session)
	o.adopt(m.Session)
	return m.Session, nil
}

// Logout ends this tab's session and the queue's, for every tab. With purge
// the records of this tab's user are deleted (an in-flight send may still
// reach the server; its idempotency key keeps it to one effect). Without
// purge they are kept, and never sent under another user, and Logout
// returns 0.
func (o *Outbox) Logout(ctx context.Context, purge bool) (int, error) {
	user := o.Session().UserID
	m, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
		m.Session = NextSession(m.Session, Session{})
		return nil
	})
	if err != nil {
		return 0, err
	}
	o.setOwn(Session{})
	o.adopt(m.Session)
	if !purge || user == "" {
		return 0, nil
	}
	return o.cfg.Store.Delete(ctx, Filter{UserID: user})
}

// Session returns this tab's session: the one new records are enqueued
// under.
func (o *Outbox) Session() Session {
	o.mu.Lock()
	s := o.session
	o.mu.Unlock()
	return s
}

// QueueSession returns this tab's view of the queue's session, the one
// records are sent under: as it last wrote or read it.
func (o *Outbox) QueueSession() Session {
	o.mu.Lock()
	s := o.queue
	o.mu.Unlock()
	return s
}

// JoinSession makes the queue's stored session this tab's own as well: a
// tab that opens without a user of its own enqueues for the user logged in.
func (o *Outbox) JoinSession(ctx context.Context) (Session, error) {
	s, err := o.SyncSession(ctx)
	if err == nil {
		o.setOwn(s)
	}
	return s, err
}

// setOwn makes s this tab's session and tells the session hook (the
// builder of appends outside Go learns it synchronously).
func (o *Outbox) setOwn(s Session) {
	o.mu.Lock()
	o.session = s
	o.mu.Unlock()
	o.sessionHook.call()
}

// SyncSession reads the queue's session from the Store and makes it this
// tab's view of it (a tab calls it before it flushes and when it hears that
// another tab changed the session).
func (o *Outbox) SyncSession(ctx context.Context) (Session, error) {
	heard := o.heard.Load()
	m, err := o.cfg.Store.UpdateMeta(ctx, func(*Meta) error { return nil })
	if err != nil {
		return Session{}, err
	}
	o.synced(m.Session, heard)
	return m.Session, nil
}

// NoteSession tells the outbox that another tab announced a session of
// generation gen: a flush under an older one stops before its next send.
func (o *Outbox) NoteSession(gen uint64) {
	for {
		h := o.heard.Load()
		if gen <= h || o.heard.CompareAndSwap(h, gen) {
			return
		}
	}
}

// synced adopts s, read from the Store after NoteSession had heard of
// generation heard. A generation heard before the read and above the stored
// one was never written (a tab announces only after its write committed, so
// the read would have seen it): it is forgotten, or one bogus announcement
// would stop every flush for good.
func (o *Outbox) synced(s Session, heard uint64) {
	if heard > s.AuthGeneration {
		o.heard.CompareAndSwap(heard, s.AuthGeneration)
	}
	o.adopt(s)
}

// adopt makes s this tab's view of the queue's session unless the view is
// of a newer generation (reads may finish out of order).
func (o *Outbox) adopt(s Session) {
	o.mu.Lock()
	if s.AuthGeneration >= o.queue.AuthGeneration {
		o.queue = s
	}
	o.mu.Unlock()
}

// sessionChanged reports whether a and b are different sessions.
func sessionChanged(a, b Session) bool { return a != b }

// checkSession is the flush's look at the durable metadata m before a claim
// (heard: NoteSession's generation before m was read): the tab adopts m's
// session, and the flush goes on only under the session it started with and
// while its user is not held.
func (f *flushRun) checkSession(m Meta, heard uint64) error {
	f.o.synced(m.Session, heard)
	if sessionChanged(m.Session, f.session) {
		return ErrSessionChanged
	}
	if SessionHeldNow(m) {
		return ErrSessionMismatch
	}
	return nil
}

// sendable reports whether rec may be sent now by this flush: it is of the
// flush's session, that session is still the tab's view of the queue's, and
// no newer session has been announced.
func (f *flushRun) sendable(rec *queue.Record) bool {
	cur := f.o.QueueSession()
	return sessionMatches(rec, f.session) && !sessionChanged(cur, f.session) && f.o.heard.Load() <= f.session.AuthGeneration
}

// holdUser records that the receiver refused a record of user as another
// user's: while user is still the queue's session, their records are held
// until the next Login. If the session has moved on meanwhile nothing is
// held (that user's records are not sent under the new session anyway).
func (f *flushRun) holdUser(ctx context.Context, user string) error {
	_, err := f.o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
		if m.Session.UserID == user {
			m.SessionHeld = user
		}
		return nil
	})
	return err
}

// flushSession reads the queue's session and metadata for a Flush: the
// session to flush under. A session that is not the tab's view of it
// (another tab logged in or out, and this tab had not read it yet) is
// adopted and the flush does not start (ErrSessionChanged): the caller
// fenced its resource for the user it knew, and starts again under the new
// one.
func (o *Outbox) flushSession(ctx context.Context) (Session, Meta, error) {
	view, heard := o.QueueSession(), o.heard.Load()
	m, err := o.cfg.Store.UpdateMeta(ctx, func(*Meta) error { return nil })
	if err != nil {
		return Session{}, m, err
	}
	o.synced(m.Session, heard)
	switch {
	case m.Session.UserID == "":
		return Session{}, m, ErrNoSession
	case sessionChanged(view, m.Session):
		return Session{}, m, ErrSessionChanged
	case SessionHeldNow(m):
		return Session{}, m, ErrSessionMismatch
	}
	return m.Session, m, nil
}

// EventSessionMismatch: the receiver refused a record as another user's.
const EventSessionMismatch EventKind = "outbox.session_mismatch"

// SessionHeldNow reports whether m holds the queue's current user (after a
// session mismatch): no flush has anything to send until the next login, so
// its pending records are no work a watchdog should steal the lock for.
func SessionHeldNow(m Meta) bool {
	return m.SessionHeld != "" && m.SessionHeld == m.Session.UserID
}
