package storetest

import (
	"testing"

	"github.com/tabfence/tabfence/outbox"
)

// testMetaSession: the queue's session (user, tenant, generation) and the
// user held after a session mismatch persist in the metadata, and a read
// returns them unchanged.
func testMetaSession(t *testing.T, s outbox.Store) {
	want := outbox.Session{UserID: "alice", TenantID: "t1", AuthGeneration: 1<<53 - 1}
	if _, err := s.UpdateMeta(bg, func(m *outbox.Meta) error {
		m.Session, m.SessionHeld = want, "bob"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.UpdateMeta(bg, func(*outbox.Meta) error { return nil })
	if err != nil || got.Session != want || got.SessionHeld != "bob" {
		t.Fatalf("meta %+v %v", got, err)
	}
	if _, err := s.UpdateMeta(bg, func(m *outbox.Meta) error {
		m.Session, m.SessionHeld = outbox.Session{AuthGeneration: 2}, ""
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err = s.UpdateMeta(bg, func(*outbox.Meta) error { return nil })
	if err != nil || got.Session != (outbox.Session{AuthGeneration: 2}) || got.SessionHeld != "" {
		t.Fatalf("meta after logout %+v %v", got, err)
	}
}
