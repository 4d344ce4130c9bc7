//go:build js && wasm

package browser

// SetSettledHook makes c, while it leads, call h between a settled
// mutation's delete from the pending store and its announcement; h
// returning true stops the announcement (a leader that dies there).
func SetSettledHook(c *Conn, h func(id string) bool) {
	c.mu.Lock()
	c.testSettled = h
	c.mu.Unlock()
}
