package queue

import "strconv"

// Migration upgrades a payload from one schema version to the next. It must
// be pure and deterministic: it runs at every send, never persisted, so a
// resend after a crash produces the same body (and the same hash at the
// server) and an old record is never rewritten. One that fails leaves the
// record as stored and unsupported in this runtime (SchemaRefused).
type Migration struct {
	From, To int
	Migrate  func(payload []byte) ([]byte, error)
}

// MigratePayload upgrades p from version from to version to, one step at a
// time in the order SchemaGate checked (nextStep). A version newer than to,
// or one without a path, is left alone by the claim and never reaches here.
func MigratePayload(migs []Migration, p []byte, from, to int) ([]byte, error) {
	for from < to {
		m := nextStep(migs, from, to)
		if m == nil {
			return nil, &opError{op: "migrate", detail: "no migration from schema v" + strconv.Itoa(from) + " to v" + strconv.Itoa(to), err: ErrSchemaUnsupported}
		}
		out, err := m.Migrate(p)
		if err != nil {
			return nil, &opError{op: "migrate", detail: "v" + strconv.Itoa(from) + ": " + Short(err.Error()), err: ErrSchemaUnsupported}
		}
		p, from = out, m.To
	}
	return p, nil
}
