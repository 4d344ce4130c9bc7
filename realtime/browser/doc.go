// Package browser runs a realtime connection in the tabs of one browser:
// one WebSocket, held by the leader of a fenced election, one writer to the
// IndexedDB replica, and every tab current.
//
// The leader (a Web Lock, with a fencing token from IndexedDB) drives the
// client core of package realtime over the page's WebSocket. A server delta
// is written to the replica under the leader's token together with the
// replica's version, and only then announced on the fenced channel (write,
// then announce), so a follower that misses an announcement or sees a gap
// reloads from IndexedDB and finds at least what it was told. A mutation
// made in any tab is stored in the durable pending store, shown by every
// tab, sent by the leader only, and settled by id in every tab when some
// leader's ack or reject is announced, so the caller's promise settles even
// if the leader changed in between; the next leader resends what is pending
// once the server says ready, and the server applies an id once.
//
// The channel's vocabulary (payloads are plain objects, and untrusted:
// what does not validate is counted in Stats and dropped). Under the
// leaders' fenced resource: "rt.delta" {version, prev, changes}, "rt.reload"
// {version}, "rt.settled" {id, ack|reject}, "rt.status" {state, lastError}
// (token and leader id are the envelope's). From any tab, each under a
// resource of its own: "rt.mutation" (the pending record), "rt.status?" (a
// new tab, or Retry: an unauthorized leader then dials again), "rt.offline"
// {offline}. The replica version, the offline switch (StoreMeta) and the
// pending mutations (StorePending) live in the replica's database, so a
// next leader restores them. A delta whose changes do not validate
// (ErrChanges) is counted and stored as an empty step: the server's stream
// has moved past it and nobody could apply it.
//
// Names carry the protocol (see Names), so tabs of two builds never share a
// lock, a channel or a database. The rules (names, options, the change
// format, status) are plain Go tested natively; the plumbing is in *_js.go.
package browser
