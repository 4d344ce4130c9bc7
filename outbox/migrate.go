package outbox

import "strconv"

// Migration upgrades a payload from one schema version to the next. It must
// be pure and deterministic: it runs at every send, never persisted, so a
// resend after a crash produces the same body (and the same hash at the
// server) and an old record is never rewritten.
type Migration struct {
	From, To int
	Migrate  func(payload []byte) ([]byte, error)
}

// migratePayload upgrades p from version from to version to. A version
// newer than to is left alone by the scheduler and never reaches here.
func migratePayload(migs []Migration, p []byte, from, to int) ([]byte, error) {
	for from < to {
		var m *Migration
		for i := range migs {
			if migs[i].From == from && migs[i].To > from && migs[i].To <= to {
				m = &migs[i]
				break
			}
		}
		if m == nil {
			return nil, &opError{op: "migrate", detail: "no migration from schema v" + strconv.Itoa(from) + " to v" + strconv.Itoa(to), err: ErrSchemaUnsupported}
		}
		out, err := m.Migrate(p)
		if err != nil {
			return nil, &opError{op: "migrate", detail: "v" + strconv.Itoa(from) + ": " + short(err.Error()), err: ErrSchemaUnsupported}
		}
		p, from = out, m.To
	}
	return p, nil
}
