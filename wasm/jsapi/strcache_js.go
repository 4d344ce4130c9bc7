//go:build js && wasm

package jsapi

import (
	"sync"
	"syscall/js"
)

// Recurring maps the strings that recur in message after message (kinds,
// resources, owner IDs) to JavaScript strings made once: each js.ValueOf
// of a Go string decodes it in JavaScript and registers a new reference
// (with a Go finalizer), which the message path would otherwise pay per
// field per message.
var Recurring StrCache

type StrCache struct {
	mu   sync.Mutex
	ents [16]struct {
		s string
		v js.Value
	}
	next int
}

// lookup returns the Go string of v when v is a JavaScript string in the
// cache: wasm_exec.js gives equal strings the same reference while one is
// held, so the comparison is Go-side only — no copy of v into Go.
func (c *StrCache) Lookup(v js.Value) (string, bool) {
	s, ok := "", false
	c.mu.Lock()
	for i := range c.ents {
		if e := &c.ents[i]; e.v.Type() == js.TypeString && e.v.Equal(v) {
			s, ok = e.s, true
			break
		}
	}
	c.mu.Unlock()
	return s, ok
}

// get returns s as a JavaScript string. Strings over 256 bytes are not
// kept.
func (c *StrCache) Get(s string) js.Value {
	c.mu.Lock()
	for i := range c.ents {
		if e := &c.ents[i]; e.s == s && e.v.Type() == js.TypeString {
			c.mu.Unlock()
			return e.v
		}
	}
	v := js.ValueOf(s)
	if len(s) <= 256 {
		c.ents[c.next].s, c.ents[c.next].v = s, v
		c.next = (c.next + 1) % len(c.ents)
	}
	c.mu.Unlock()
	return v
}
