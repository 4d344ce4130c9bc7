package realtime

import (
	"errors"
	"net/http"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// ErrTooLarge: a delta or an ack would be larger than rt.MaxMessage, the
// bound every client decodes with. Sent anyway, the client would drop the
// connection, reconnect, get it again, and loop for good; so it is refused
// before it is committed or published.
var ErrTooLarge = errors.New("realtime: message larger than rt.MaxMessage")

// ProblemTooLarge is the type of the final rejection (413) of a mutation
// whose result or changes would not fit in one message: its transaction is
// rolled back.
const ProblemTooLarge = wire.ProblemBase + "realtime-message-too-large"

// checkChanges reports ErrTooLarge when a delta carrying changes would not
// fit in a message, whatever its version numbers.
func checkChanges(changes []byte) error {
	if encodedLen(rt.Delta{Version: wire.MaxToken, Prev: wire.MaxToken, Changes: changes}) > rt.MaxMessage {
		return ErrTooLarge
	}
	return nil
}

// checkResult reports ErrTooLarge when a handler's result would make a
// delta or an ack (replayed or not) that does not fit in a message.
func checkResult(id string, res Result) error {
	if res.Changes != nil {
		if err := checkChanges(res.Changes); err != nil {
			return err
		}
	}
	ack := rt.Ack{ID: id, Status: uint64(res.Response.Status), Replayed: true, Result: res.Response.Body}
	if encodedLen(ack) > rt.MaxMessage {
		return ErrTooLarge
	}
	return nil
}

func encodedLen(m rt.Message) int { return len(rt.Encode(m)) }

// tooLarge is the stored answer of a mutation refused with ErrTooLarge: a
// 4xx, so the receiver rolls the handler's writes back and every resend is
// refused the same way.
func tooLarge() receiver.Response {
	return receiver.ProblemResponse(receiver.Problem{Type: ProblemTooLarge, Title: "Result too large for the realtime connection",
		Status: http.StatusRequestEntityTooLarge, Detail: "The changes or the answer would exceed the message bound; nothing was stored."})
}
