package receiver

import (
	"net/http"

	"github.com/tabfence/tabfence/wire"
)

// checkClientUser refuses a mutation whose X-Client-User (the user the
// outbox record was enqueued under) is not the authenticated scope: the
// request carries another user's credentials than its record's, as a tab
// that has not yet heard of a login in another tab sends with the browser's
// cookie. Defence in depth only: the header never grants anything, it can
// only make the receiver refuse. A request without it is not checked.
func checkClientUser(h http.Header, scope string) *Problem {
	vs := h.Values(wire.HeaderClientUser)
	if len(vs) == 0 {
		return nil
	}
	want := wire.FormatClientUser(scope)
	for _, v := range vs {
		if v != want {
			p := probSessionMismatch
			return &p
		}
	}
	return nil
}

var probSessionMismatch = Problem{Type: wire.ProblemSessionMismatch, Title: "Record of another user than the authenticated one",
	Status: http.StatusForbidden,
	Detail: "X-Client-User names another user than these credentials authenticate. Nothing was stored; send the record again once its user is logged in."}
