//go:build js && wasm

package idbstore

import (
	"syscall/js"

	"github.com/tabfence/tabfence/outbox"
)

// The queue's session in the IndexedDB meta row (see session.go): user,
// tenant and generation, and the user held after a session mismatch. No
// credential is ever part of it.

func encodeMetaSession(o js.Value, m *outbox.Meta) {
	o.Set("sessionUser", m.Session.UserID)
	o.Set("sessionTenant", m.Session.TenantID)
	setUint(o, "sessionGen", m.Session.AuthGeneration)
	o.Set("sessionHeld", m.SessionHeld)
}

func decodeMetaSession(r *reader, m *outbox.Meta) {
	m.Session = outbox.Session{UserID: r.str("sessionUser"), TenantID: r.str("sessionTenant"), AuthGeneration: r.uint("sessionGen")}
	m.SessionHeld = r.str("sessionHeld")
}

func metaSessionEqual(a, b *outbox.Meta) bool {
	return a.Session == b.Session && a.SessionHeld == b.SessionHeld
}
