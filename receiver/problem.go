package receiver

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tabfence/tabfence/wire"
)

// Problem is an RFC 9457 problem details body. Clients branch on Type (one of
// the wire.Problem* constants), never on Title. Detail never echoes request
// data back beyond what the client itself sent in a header it controls.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Highest is the highest fencing token accepted for the resource; only
	// set on a stale-token rejection.
	Highest uint64 `json:"highest,omitempty"`
}

// ProblemResponse renders p as a Response, e.g. for a business handler that
// rejects a command with 422. It is stored and replayed like any 4xx answer.
func ProblemResponse(p Problem) Response {
	b, _ := json.Marshal(p)
	h := http.Header{}
	h.Set("Content-Type", wire.ContentTypeProblem)
	if p.Highest > 0 {
		h.Set(wire.HeaderFencingHighest, wire.FormatToken(p.Highest))
	}
	return Response{Status: p.Status, Header: h, Body: b}
}

// JSON renders v as a JSON Response with the given status.
func JSON(status int, v any) (Response, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Response{}, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return Response{Status: status, Header: h, Body: b}, nil
}

// writeResponse sends r on w.
func writeResponse(w http.ResponseWriter, r Response) {
	for k, vs := range r.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(r.Body)))
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(r.Body)
}

// writeProblem sends p on w.
func writeProblem(w http.ResponseWriter, p Problem) {
	writeResponse(w, ProblemResponse(p))
}

// Canned problems the receiver itself answers with.
var (
	probMissingKey = Problem{Type: wire.ProblemMissingKey, Title: "Idempotency-Key header required", Status: http.StatusBadRequest,
		Detail: "Send an Idempotency-Key header (1-255 printable ASCII characters) with every mutation."}
	probMalformedKey = Problem{Type: wire.ProblemMalformedKey, Title: "Idempotency-Key malformed", Status: http.StatusBadRequest,
		Detail: "The key must be 1-255 printable ASCII characters other than '\"' and '\\', bare or as a quoted sf-string."}
	probKeyReuse = Problem{Type: wire.ProblemKeyReuse, Title: "Idempotency-Key reused with another payload", Status: http.StatusUnprocessableEntity,
		Detail: "This key was already used for a different request; use a new key for a new command."}
	probInFlight = Problem{Type: wire.ProblemInFlight, Title: "Request with this Idempotency-Key still in progress", Status: http.StatusConflict,
		Detail: "Retry later to receive the stored result."}
	probMalformedToken = Problem{Type: wire.ProblemMalformedToken, Title: "Fencing headers malformed", Status: http.StatusBadRequest}
	probForged         = Problem{Type: wire.ProblemForgedToken, Title: "Fencing token was never issued", Status: http.StatusBadRequest,
		Detail: "Obtain a token from POST /fence/{resource}; tokens the server did not issue are rejected."}
	probUnauthenticated = Problem{Type: wire.ProblemUnauthenticated, Title: "Authentication required", Status: http.StatusUnauthorized,
		Detail: "The request carries no valid credentials for a user; nothing was stored. Sign in again, then retry."}
	probTooLarge = Problem{Type: wire.ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge}
	probInternal = Problem{Type: wire.ProblemInternal, Title: "Internal server error", Status: http.StatusInternalServerError,
		Detail: "Nothing was stored; retrying with the same Idempotency-Key is safe."}
	// probCommitUnknown answers a failed COMMIT: the connection may have
	// been lost after the database committed, so the effect may exist.
	probCommitUnknown = Problem{Type: wire.ProblemInternal, Title: "Internal server error", Status: http.StatusInternalServerError,
		Detail: "The request may or may not have been stored; retrying with the same Idempotency-Key is safe."}
	probBodyUnreadable = Problem{Type: wire.ProblemBodyUnreadable, Title: "Request body unreadable", Status: http.StatusBadRequest,
		Detail: "The body ended before its declared length (the connection closed mid-body); nothing was stored."}
	probBodyTimeout = Problem{Type: wire.ProblemBodyTimeout, Title: "Request body too slow", Status: http.StatusRequestTimeout}
	probBusy        = Problem{Type: wire.ProblemBusy, Title: "Server busy", Status: http.StatusServiceUnavailable,
		Detail: "Too many request bodies are being received at once; nothing was stored. Retry after Retry-After seconds."}
	probInvalidUTF8 = Problem{Type: wire.ProblemInvalidUTF8, Title: "Request body is not valid UTF-8", Status: http.StatusUnprocessableEntity,
		Detail: "The body must be valid UTF-8; nothing was stored."}
	probInvalidText = Problem{Type: wire.ProblemInvalidText, Title: "Text cannot be stored", Status: http.StatusUnprocessableEntity,
		Detail: "A text field holds a NUL character or invalid UTF-8, which the database cannot store; the command had no effect."}
	probBatchMalformed = Problem{Type: wire.ProblemBatchMalformed, Title: "Batch malformed", Status: http.StatusBadRequest,
		Detail: `Send {"mutations":[{"key":"...","endpoint":"/path","id":"...","op":"...","entity":"...","payload":...}]}, each key valid and once, each endpoint an origin-relative path; nothing was stored.`}
	probBatchTooLarge = Problem{Type: wire.ProblemBatchTooLarge, Title: "Too many mutations in one batch", Status: http.StatusRequestEntityTooLarge}
	// probBatchDeadline answers the mutations a batch had no time left to
	// start (see budgetSpent).
	probBatchDeadline = Problem{Type: wire.ProblemBusy, Title: "Batch out of time", Status: http.StatusServiceUnavailable,
		Detail: "The batch ran out of time before this mutation started; nothing of it was stored. Send it again."}
	// probBatchFull answers the mutations a batch's answer had no room
	// left for (Options.MaxBatchResponse).
	probBatchFull = Problem{Type: wire.ProblemBusy, Title: "Batch answer full", Status: http.StatusServiceUnavailable,
		Detail: "The batch's answer reached its size limit before this mutation's; nothing of it was stored. Send it again."}
	probMethod = Problem{Type: wire.ProblemBase + "method-not-allowed", Title: "Method not allowed", Status: http.StatusMethodNotAllowed}
)

func staleProblem(highest uint64) Problem {
	return Problem{Type: wire.ProblemStaleToken, Title: "Fencing token is stale", Status: http.StatusConflict,
		Detail: "A newer leader's token was accepted for this resource; step down.", Highest: highest}
}
