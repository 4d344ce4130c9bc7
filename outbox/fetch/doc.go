// Package fetch is the outbox.Transport over the browser's fetch: one
// request per send, the response body bounded in size, and a failure while
// the browser reports no network (navigator.onLine false) reported as
// outbox.ErrOffline, so the flush waits for the network instead of backing
// off.
package fetch
