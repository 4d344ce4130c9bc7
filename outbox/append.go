package outbox

import (
	"strings"
	"sync"
	"time"
)

// AppendRules is what the record of a plain append holds besides the
// operation's own fields, its random ids and the time: everything a builder
// outside Go needs to write the same record Enqueue writes. The browser's
// loader (jsglue/loader/tabfence.js) is that builder: an enqueue through the
// JavaScript API then makes no call into Go before its commit, which was
// the runtime's main cost per enqueue (docs/outbox-notes.md; the
// bookkeeping after the commit is batched, see Appended).
//
// A plain append is an operation whose policy cannot coalesce it: its type
// is in Types, and it has no operation key unless its type's KeyedAppends.
// Anything else (a dedupe policy, a payload above InlineLimit, an unknown
// type) goes through Enqueue, which decides and gives the typed error.
type AppendRules struct {
	Session       Session
	SchemaVersion int
	InlineLimit   int // payloads above this go to the blob store (Enqueue); <= 0: no limit
	Types         map[string]AppendType
}

// AppendType is one operation type's share of AppendRules.
type AppendType struct {
	MaxAttempts int  // the record's maxAttempts (the policy's, else the outbox default)
	Keyed       bool // an operation with a key is a plain append too (policy Append)
}

// AppendRules returns the rules of plain appends under the current
// session. ok is false when no append can be built outside Go: no session
// (Enqueue fails with ErrNoSession), or ids or time the app supplies
// (Config.NewID, Config.Clock), which only Enqueue uses.
func (o *Outbox) AppendRules() (rules AppendRules, ok bool) {
	if o.customIDs {
		return rules, false
	}
	if _, sys := o.cfg.Clock.(SystemClock); !sys {
		return rules, false
	}
	s := o.Session()
	if s.UserID == "" {
		return rules, false
	}
	rules = AppendRules{Session: s, SchemaVersion: o.cfg.SchemaVersion, InlineLimit: o.cfg.InlineLimit,
		Types: make(map[string]AppendType, len(o.cfg.Policies))}
	for name, pol := range o.cfg.Policies {
		if !pol.Dedupe.known() {
			continue // Enqueue refuses it
		}
		max := pol.MaxAttempts
		if max <= 0 {
			max = o.cfg.MaxAttempts
		}
		rules.Types[name] = AppendType{MaxAttempts: max, Keyed: !pol.ReadsQueue("any key")}
	}
	return rules, true
}

// OnSessionChange registers fn, called after every Login and Logout, once
// the new session is in place and before Logout purges: a builder of
// appends outside Go (AppendRules) must learn the session synchronously,
// or it could write a record of the user being purged after the purge.
// One function; a later call replaces it.
func (o *Outbox) OnSessionChange(fn func()) { o.sessionHook.set(fn) }

// changeHook is one registered callback, replaced by the next registration and
// called outside its lock (it may call back into its owner).
type changeHook struct {
	mu sync.Mutex
	fn func()
}

func (h *changeHook) set(fn func()) {
	h.mu.Lock()
	h.fn = fn
	h.mu.Unlock()
}

func (h *changeHook) call() {
	h.mu.Lock()
	fn := h.fn
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// Appended emits the enqueue event of a plain append a builder outside Go
// committed (see AppendRules): its record id, the hash of its operation
// key (HashKey) and its creation time.
func (o *Outbox) Appended(id, opKeyHash string, at time.Time) {
	o.emit(Event{Kind: EventEnqueue, At: at, RecordID: id, OperationKeyHash: opKeyHash, Reason: string(ActionAppended)})
}

// HashKey is the OperationKeyHash of events about operation key k: the
// first 16 hex digits of its SHA-256 ("" for no key). Operation keys may
// hold user data; events carry only this.
func HashKey(k string) string {
	if k == "" {
		return ""
	}
	return HashPayload([]byte(k))[:16]
}

// AppendedRecord is a plain append a builder outside Go committed.
type AppendedRecord struct {
	ID               string
	OperationKeyHash string // HashKey of its operation key
	At               time.Time
}

// ParseAppended reads a batch of committed appends from the loader:
// entries "key,id,keyHash,unixMillis" joined by ";", key the number the
// loader knows the outbox's template by (its handle in the JavaScript API). One string crosses into Go
// per batch, instead of a value per field. fn gets each well-formed entry;
// a malformed one (another script's call, a bug) is counted in dropped and
// skipped, never guessed at.
func ParseAppended(batch string, fn func(key int, rec AppendedRecord)) (dropped int) {
	// Parsed by hand: strconv's parsers and strings.Split would link their
	// error formatting into the download for four plain fields.
	for batch != "" {
		e := batch
		if i := strings.IndexByte(batch, ';'); i >= 0 {
			e, batch = batch[:i], batch[i+1:]
		} else {
			batch = ""
		}
		var f [4]string
		n := 0
		for ; n < 4; n++ {
			i := strings.IndexByte(e, ',')
			if i < 0 {
				f[n], e = e, ""
				n++
				break
			}
			f[n], e = e[:i], e[i+1:]
		}
		key, ok1 := decimal(f[0])
		ms, ok2 := decimal(f[3])
		if n != 4 || e != "" || !ok1 || !ok2 || !validID(f[1]) || f[2] != "" && !isHex(f[2], 16) {
			dropped++
			continue
		}
		fn(int(key), AppendedRecord{ID: f[1], OperationKeyHash: f[2], At: time.UnixMilli(ms)})
	}
	return dropped
}

// decimal parses s, 1 to 15 decimal digits (below 2^53: a number from
// JavaScript, exact).
func decimal(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 15 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// validID reports whether id is a record id the default NewID makes.
func validID(id string) bool { return isHex(id, 32) }

// isHex reports whether s is n lowercase hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < n; i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
