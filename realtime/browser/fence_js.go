//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// ErrFence: the server issued no fencing token (Config.FencePath).
var ErrFence = errors.New("realtime/browser: no server fencing token")

// serverToken asks the server for a fencing token for the leaders'
// resource (POST FencePath+resource, with the page's cookies), as the
// outbox's flush owner does: a later leader's token makes this one's
// mutations stale at the server.
func serverToken(ctx context.Context, fencePath, resource string) (uint64, error) {
	opts := js.Global().Get("Object").New()
	opts.Set("method", "POST")
	opts.Set("credentials", "include")
	seg, err := jsglue.Invoke(js.Global().Get("encodeURIComponent"), resource)
	if err != nil {
		return 0, join(ErrFence, err)
	}
	p, err := jsglue.Call(js.Global(), "fetch", fencePath+seg.String(), opts)
	if err != nil {
		return 0, join(ErrFence, err)
	}
	resp, err := jsglue.Await(ctx, p)
	if err != nil {
		return 0, join(ErrFence, err)
	}
	if st := resp.Get("status").Int(); st != 200 {
		return 0, joinWhy(ErrFence, "fence answered HTTP "+strconv.Itoa(st))
	}
	jp, err := jsglue.Call(resp, "json")
	if err != nil {
		return 0, join(ErrFence, err)
	}
	body, err := jsglue.Await(ctx, jp)
	if err != nil || body.Type() != js.TypeObject {
		return 0, joinWhy(ErrFence, "fence answer is not an object")
	}
	tok, ok := number(body, "token")
	if !ok || tok == 0 {
		return 0, joinWhy(ErrFence, "fence answer without a token")
	}
	return tok, nil
}

// fencedSocket stamps the leader's server token on every mutation it
// sends; the rest passes through.
type fencedSocket struct {
	realtime.Socket
	resource string
	token    uint64
}

func (s fencedSocket) Send(ctx context.Context, b []byte) error {
	if len(b) > 0 && rt.Type(b[0]) == rt.TypeMutation {
		if m, err := rt.Decode(b, 0); err == nil {
			mu := m.(rt.Mutation)
			mu.Resource, mu.Token = s.resource, s.token
			b = rt.Encode(mu)
		}
	}
	return s.Socket.Send(ctx, b)
}
