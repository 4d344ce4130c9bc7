//go:build js && wasm

package idbstore

import (
	"syscall/js"

	"github.com/tabfence/tabfence/outbox"
)

// The stored form of Meta.Failure: null, or {kind, error, since,
// nextAttemptAt}.

func encodeFailure(f outbox.SendFailure) js.Value {
	if !f.Failing() {
		return jsNull
	}
	o := jsObject.New()
	o.Set("kind", string(f.Kind))
	o.Set("error", encodeErrorInfo(&f.Error))
	setTime(o, "since", f.Since)
	setTime(o, "nextAttemptAt", f.NextAttemptAt)
	return o
}

func (r *reader) failure(field string) outbox.SendFailure {
	s, ok := r.sub(field)
	if !ok {
		return outbox.SendFailure{}
	}
	f := outbox.SendFailure{Kind: outbox.FailureKind(s.str("kind")), Since: s.time("since"), NextAttemptAt: s.time("nextAttemptAt")}
	if e := s.errorInfo("error"); e != nil {
		f.Error = *e
	}
	if s.err != nil {
		s.err.Field = field + "." + s.err.Field
		r.err = s.err
		return outbox.SendFailure{}
	}
	return f
}
