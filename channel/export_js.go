//go:build js && wasm

package channel

import (
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue/loader"
)

// The message path through the loader's wasm export tabfence_channel_rx2
// (declared in package main, see jsglue/loader for the rules an export
// keeps): the loader's rx names the channel by its export number and writes
// the header into xscratch.

// exported numbers the channels the loader's rx may name.
var exported exports

type exports struct {
	mu   sync.Mutex
	next int32
	m    map[int32]*Channel
}

func (x *exports) add(c *Channel) int32 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[int32]*Channel{}
	}
	x.next++
	x.m[x.next] = c
	return x.next
}

func (x *exports) get(id int32) *Channel {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[id]
}

func (x *exports) remove(id int32) {
	if id == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, id)
}

// ReceiveExported is the body of the export tabfence_channel_rx2: it
// receives the envelope whose header the loader's rx wrote into xscratch
// (n bytes) for channel id; the payload is HeldPayload's. It returns the
// kick bit (loader.Leave). (The export's name is new with xscratch: a
// loader that writes headers into the scratch Uint8Array does not find it,
// and stays on the js.Func path.)
func ReceiveExported(id, n int32) (kick int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &kick)
	if c := exported.get(id); c != nil {
		c.receiveHeaderHeld(loader.ScratchString(int(n)), c.HeldPayload(), true)
	}
	return loader.Leave(g)
}

// HeldPayload is the payload the loader is handing to an export (its
// payload(), the fast path c was opened with), undefined without one.
func (c *Channel) HeldPayload() js.Value { return loader.HeldPayload(c.payload) }

// Woke tells the export in progress that the caller made a goroutine
// runnable (see loader.Woke): a SubscribeNow function that wakes one.
func Woke() { loader.Woke() }
