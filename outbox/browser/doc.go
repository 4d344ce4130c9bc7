// Package browser is the outbox's runtime in a page (Runtime): it opens the
// IndexedDB store, takes flush ownership through a Web Lock (or the
// fallback lease) and a server fencing token, flushes on triggers (an
// enqueue in any tab, online, visibility, a due retry), watches for a
// frozen owner (watchdog: ask, then steal), and projects the queue's status
// for every tab over a BroadcastChannel.
//
// Files: runtime_js.go (open, close, the API), triggers_js.go (the
// channel's messages and the page's events), flush_js.go (ownership and
// the flush), watchdog.go and watch_js.go (frozen owners), status_js.go
// and later_js.go (events and status, delivered in a later task),
// session_js.go (login and logout across tabs), append_js.go (the loader's
// template for plain appends), loader_js.go and appendwire.go (the loader's
// hooks and their wire format: the operation it hands Go, the ids it
// reports committed).
package browser
