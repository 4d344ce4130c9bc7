package browser

import (
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/internal/quote"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/realtime"
	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// The runtime's own stores in the replica's database, beside the app's
// replica stores: the version row and the offline switch, and the durable
// pending store.
const (
	StoreMeta    = "tf_rt_meta"
	StorePending = "tf_rt_pending"
)

// Keys of StoreMeta.
const (
	metaVersion = "version"
	metaOffline = "offline"
	metaBrowser = "browser" // this browser's random id, for the server fence
)

// ServerResource is the resource a browser's leaders fence at the server
// (FencePath): the server keys its fence by user and resource, so the
// resource names this browser (its random id) as well as the scope and
// protocol: two browsers of one user never fence each other, two leaders
// of one browser do. Bytes the receiver's resource rule refuses are
// escaped (".xx", and '.' itself), so any scope gives a valid resource.
func ServerResource(scope string, protocol int, browserID string) (string, error) {
	const hex = "0123456789abcdef"
	b := []byte("tabfence:rt:" + browserID + ":")
	for i := 0; i < len(scope); i++ {
		c := scope[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b = append(b, c)
		default:
			b = append(b, '.', hex[c>>4], hex[c&15])
		}
	}
	r := string(b) + ":v" + strconv.Itoa(protocol)
	if !wire.ValidResource(r) {
		return "", joinWhy(ErrConfig, "scope too long for a server resource")
	}
	return r, nil
}

// DefaultHiddenNotify is Config.HiddenNotify's default.
const DefaultHiddenNotify = time.Second

// Names of the lock (also the channel), the database and the fenced
// resource: all "tabfence:rt-<scope>:v<protocol>", so two builds of other
// protocols never share any of them.
func (c Config) Names() (Names, error) {
	if c.Scope == "" {
		return Names{}, joinWhy(ErrConfig, "empty scope")
	}
	p := c.Protocol
	if p == 0 {
		p = 1
	}
	n, err := locks.Name("rt-"+c.Scope, p)
	if err != nil {
		return Names{}, join(ErrConfig, err)
	}
	if l := len(tabResource(n, "")) + tabIDLen; l > maxResourceLen() {
		return Names{}, joinWhy(ErrConfig, "scope too long: a tab's channel resource would be "+
			strconv.Itoa(l)+" bytes, over "+strconv.Itoa(maxResourceLen())+" (at most "+strconv.Itoa(MaxScope(p))+" bytes of scope)")
	}
	return Names{Lock: n, Database: n, Resource: n}, nil
}

// tabResource is the channel resource a tab's own requests (mutations,
// status?, offline) are posted under: the lock name and the tab's id.
func tabResource(lock, id string) string { return lock + "/tab/" + id }

// tabIDLen is the length of a tab's id (channel.NewID: 128 bits, hex).
const tabIDLen = 32

// maxResourceLen is the longest resource every layer a derived name
// reaches takes: the channel (UTF-16 units, at most the bytes), the
// fenced IndexedDB resource and the server's fencing resource.
func maxResourceLen() int {
	return min(channel.DefaultLimits.MaxResource, idb.MaxResourceLen, wire.MaxResourceLen)
}

// MaxScope is the longest scope (bytes) Names accepts for protocol p.
func MaxScope(p int) int {
	lock, _ := locks.Name("rt-x", p)
	return maxResourceLen() - (len(tabResource(lock, "")) - 1) - tabIDLen
}

// normalized validates c and fills its defaults.
func (c Config) normalized() (Config, Names, error) {
	if c.Protocol == 0 {
		c.Protocol = 1
	}
	if c.SchemaVersion == 0 {
		c.SchemaVersion = 1
	}
	if c.HiddenNotify <= 0 {
		c.HiddenNotify = DefaultHiddenNotify
	}
	names, err := c.Names()
	if err == nil {
		err = c.check()
	}
	if err != nil {
		return c, Names{}, err
	}
	return c, names, nil
}

// check is normalized's rule for a config with its defaults filled. (By
// pointer and apart from normalized: every return of a Config by value
// copies the whole struct.)
func (c *Config) check() error {
	var why string
	switch {
	case c.Protocol < 1:
		why = "protocol must be >= 1"
	case c.SchemaVersion < 1:
		why = "schema version must be >= 1"
	case c.URL == nil:
		why = "no URL"
	case len(c.Stores) == 0:
		why = "no replica stores"
	case len(c.User) > rt.MaxUser:
		why = "user too long"
	default:
		why = badStore(c.Stores)
	}
	if why != "" {
		return joinWhy(ErrConfig, why)
	}
	if c.StallAfter != 0 {
		if err := locks.ValidStallAfter(c.StallAfter, true); err != nil {
			return join(ErrConfig, err)
		}
	}
	return nil
}

// badStore says why a replica store name is not allowed, or "".
func badStore(stores []string) string {
	seen := map[string]bool{}
	for _, s := range stores {
		if s == "" || (len(s) >= 3 && s[:3] == "tf_") || seen[s] {
			return "store name " + quote.Quote(s) + " is empty, reserved (tf_) or repeated"
		}
		seen[s] = true
	}
	return ""
}

// join is errors.Join(kind, err), and joinWhy the same with a new error
// "realtime/browser: why": one call site of the variadic errors.Join for
// the package, since in wasm each call site costs about a kilobyte.
//
//go:noinline
func join(kind, err error) error { return errors.Join(kind, err) }

//go:noinline
func joinWhy(kind error, why string) error {
	return join(kind, errors.New("realtime/browser: "+why))
}

// settleOp is the prefix of the fenced operation id under which the leader
// removes a settled mutation from the pending store.
const settleOp = "s"

// MaxMutationID is the longest mutation id: every operation id derived from
// it (settleOp+id) must still be a valid fenced operation id, or the
// mutation could be sent but never settled.
const MaxMutationID = idb.MaxOperationIDLen - len(settleOp)

// checkMutation validates a mutation made here or received from another
// tab (messages on the channel are untrusted) with the wire's own rules:
// what the server would refuse is refused before it is stored.
func checkMutation(m rt.Mutation) error {
	if m.Resource != "" || m.Token != 0 {
		return errors.New("realtime/browser: a mutation carries no fencing token of its own")
	}
	if len(m.ID) > MaxMutationID {
		return errors.New("realtime/browser: mutation id longer than " + strconv.Itoa(MaxMutationID) + " bytes")
	}
	if len(m.Payload) > rt.MaxMessage/2 {
		return errors.New("realtime/browser: payload too large")
	}
	if _, err := rt.Decode(rt.Encode(m), 0); err != nil {
		return err
	}
	return nil
}

// checkChange is the rule of one change of a delta or snapshot: a replica
// store, a key, and either a value or deleted:true.
func checkChange(stores []string, store, key string, hasValue, deleted bool) error {
	ok := false
	for _, s := range stores {
		ok = ok || s == store
	}
	switch {
	case !ok:
		return joinWhy(ErrChanges, "not a replica store: "+quote.Quote(store))
	case key == "" || len(key) > MaxKey:
		return joinWhy(ErrChanges, "bad key")
	case deleted == hasValue:
		return joinWhy(ErrChanges, "a change has a value or deleted:true")
	}
	return nil
}

// MaxKey bounds a replica key (bytes); MaxChanges the changes of one
// delta or snapshot.
const MaxKey = 1024

const MaxChanges = 100000

// MaxPending bounds the pending mutations a tab lists: another tab's
// mutation past it is dropped and counted (Stats.DroppedMutations).
const MaxPending = 10000

// stateOf is the state every tab shows for the leader's machine state and
// the browser's offline switch.
func stateOf(s realtime.State, offline bool) State {
	switch {
	case offline:
		return StateOffline
	case s == realtime.Ready:
		return StateReady
	case s == realtime.Unauthorized:
		return StateUnauthorized
	case s == realtime.Outdated:
		return StateOutdated
	case s == realtime.Offline:
		return StateConnecting // waiting to redial: still trying
	}
	return StateConnecting
}

// parseState reads a state announced by a leader; ok false for anything
// else (the channel is untrusted).
func parseState(s string) (State, bool) {
	switch State(s) {
	case StateConnecting, StateReady, StateUnauthorized, StateOffline, StateOutdated, StateClosed:
		return State(s), true
	}
	return "", false
}

// sortPending orders pending mutations oldest first.
func sortPending(p []PendingMutation) {
	slices.SortStableFunc(p, func(a, b PendingMutation) int { return a.MadeAt.Compare(b.MadeAt) })
}
