package realtime_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// bigNote inserts the note; "wide" publishes its payload twice as the
// delta, "loud" answers with it twice: either is larger than a message.
func bigNote(ctx context.Context, tx receiver.Tx, r *realtime.Request) (realtime.Result, error) {
	res, err := insertNote(ctx, tx, r)
	twice := bytes.Repeat(r.Payload, 2)
	switch r.Op {
	case "wide":
		res.Changes = twice
	case "loud":
		res.Response.Body = twice
	}
	return res, err
}

// A mutation whose delta or ack would exceed the message bound every
// client decodes with is refused for good (413, no retry), its writes
// rolled back and nothing published: sent, it would make the client drop
// the connection, reconnect and receive it again, without end.
func TestTooLargeResultRejectedFinal(t *testing.T) {
	for name, mk := range feeds(t) {
		t.Run(name, func(t *testing.T) {
			e := newEnvWith(t, realtime.Options{}, mk, bigNote)
			c, watcher := e.dial("u1"), e.dial("u1")
			c.hello(0)
			watcher.hello(0)
			payload := bytes.Repeat([]byte("x"), rt.MaxMessage*6/10)
			for i, op := range []string{"wide", "loud"} {
				id := "big-" + op
				c.send(rt.Mutation{ID: id, Op: op, Entity: "note", Payload: payload})
				m, err := c.recv()
				require.NoError(t, err, "the client could not decode what the server sent for %s", op)
				rej, ok := m.(rt.Reject)
				require.True(t, ok, "want a reject for %s, got %T", op, m)
				require.Equal(t, id, rej.ID)
				require.Equal(t, realtime.ProblemTooLarge, rej.Problem.Type)
				require.EqualValues(t, 413, rej.Problem.Status)
				require.False(t, rej.Retry)
				require.Equal(t, 0, e.notes("u1"), "rolled back (%d)", i)
			}
			// The connection lives on and no version was taken.
			small := rt.Mutation{ID: "small", Op: "create", Entity: "note", Payload: []byte(`{"body":"hi"}`)}
			c.send(small)
			require.Equal(t, rt.Delta{Version: 1, Prev: 0, Changes: small.Payload}, c.must())
			require.IsType(t, rt.Ack{}, c.must())
			require.Equal(t, rt.Delta{Version: 1, Prev: 0, Changes: small.Payload}, watcher.must())

			_, err := e.srv.Publish(context.Background(), "u1", bytes.Repeat(payload, 2))
			require.True(t, errors.Is(err, realtime.ErrTooLarge), "got %v", err)
		})
	}
}
