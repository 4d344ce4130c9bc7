package browser

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/realtime"
	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

func goodConfig() Config {
	return Config{Scope: "ws1", URL: func(context.Context) (string, error) { return "/rt", nil }, Stores: []string{"issues"}}
}

// The lock, the channel, the database and the fenced resource carry the
// scope and the protocol: two builds never share any of them.
func TestNames(t *testing.T) {
	n, err := goodConfig().Names()
	if err != nil || n.Lock != "tabfence:rt-ws1:v1" || n.Database != n.Lock || n.Resource != n.Lock {
		t.Fatalf("%+v %v", n, err)
	}
	c := goodConfig()
	c.Protocol = 2
	if n2, _ := c.Names(); n2.Lock != "tabfence:rt-ws1:v2" {
		t.Fatalf("protocol 2: %+v", n2)
	}
}

func TestConfigValidation(t *testing.T) {
	c, _, err := goodConfig().normalized()
	if err != nil || c.Protocol != 1 || c.SchemaVersion != 1 || c.HiddenNotify != DefaultHiddenNotify {
		t.Fatalf("%+v %v", c, err)
	}
	bad := map[string]func(*Config){
		"no scope":         func(c *Config) { c.Scope = "" },
		"control in scope": func(c *Config) { c.Scope = "a\nb" },
		"protocol":         func(c *Config) { c.Protocol = -1 },
		"schema":           func(c *Config) { c.SchemaVersion = -2 },
		"no url":           func(c *Config) { c.URL = nil },
		"no stores":        func(c *Config) { c.Stores = nil },
		"empty store":      func(c *Config) { c.Stores = []string{""} },
		"reserved store":   func(c *Config) { c.Stores = []string{"tf_rt_meta"} },
		"repeated store":   func(c *Config) { c.Stores = []string{"a", "a"} },
		"stall too short":  func(c *Config) { c.StallAfter = time.Second },
		"user too long":    func(c *Config) { c.User = strings.Repeat("u", rt.MaxUser+1) },
	}
	for name, mut := range bad {
		c := goodConfig()
		mut(&c)
		if _, _, err := c.normalized(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Changes must name a replica store (never the runtime's own), a key, and
// either a value or deleted:true.
func TestCheckChangeRule(t *testing.T) {
	stores := []string{"issues"}
	if err := checkChange(stores, "issues", "k", true, false); err != nil {
		t.Fatal(err)
	}
	if err := checkChange(stores, "issues", "k", false, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		store, key    string
		value, delete bool
	}{
		{"tf_rt_meta", "version", true, false},
		{"other", "k", true, false},
		{"issues", "", true, false},
		{"issues", strings.Repeat("k", MaxKey+1), true, false},
		{"issues", "k", false, false},
		{"issues", "k", true, true},
	} {
		if err := checkChange(stores, c.store, c.key, c.value, c.delete); !errors.Is(err, ErrChanges) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// A mutation is checked with the wire's own rules before it is stored or
// taken from another tab.
func TestCheckMutationRule(t *testing.T) {
	if err := checkMutation(rt.Mutation{ID: "m1", Op: "issue.put", Entity: "issue.put", Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []rt.Mutation{
		{ID: "", Op: "a", Entity: "a"},
		{ID: "has space", Op: "a", Entity: "a"},
		{ID: "m", Op: "", Entity: "a"},
		{ID: "m", Op: "a", Entity: "a b"},
		{ID: "m", Op: "a", Entity: "a", Resource: "r", Token: 3},
		{ID: "m", Op: "a", Entity: "a", Payload: make([]byte, rt.MaxMessage)},
		{ID: strings.Repeat("m", MaxMutationID+1), Op: "a", Entity: "a"},
	} {
		if checkMutation(m) == nil {
			t.Errorf("accepted %+v", m.ID)
		}
	}
}

// The longest mutation id accepted still makes a valid settle operation
// id: otherwise the leader sends it, and its fenced delete of the pending
// row is refused for good (the mutation never settles).
func TestCheckMutationIDSettles(t *testing.T) {
	accepted := 0
	for n := 1; n <= wire.MaxKeyLen+1; n++ {
		m := rt.Mutation{ID: strings.Repeat("m", n), Op: "a", Entity: "a"}
		if checkMutation(m) != nil {
			continue
		}
		accepted = n
		op := idb.Op{Resource: "r", Token: 1, OperationID: settleOp + m.ID}
		if err := op.Validate(); err != nil {
			t.Fatalf("a %d-byte mutation id is accepted but its settle op id is invalid: %v", n, err)
		}
	}
	if accepted != MaxMutationID {
		t.Fatalf("longest id accepted: %d bytes, want %d", accepted, MaxMutationID)
	}
}

func TestStateOf(t *testing.T) {
	for _, c := range []struct {
		s       realtime.State
		offline bool
		want    State
	}{
		{realtime.Ready, false, StateReady},
		{realtime.Ready, true, StateOffline},
		{realtime.Unauthorized, false, StateUnauthorized},
		{realtime.Connecting, false, StateConnecting},
		{realtime.Offline, false, StateConnecting},
		{realtime.Outdated, false, StateOutdated},
	} {
		if got := stateOf(c.s, c.offline); got != c.want {
			t.Errorf("%v/%v: %v", c.s, c.offline, got)
		}
	}
	if st, ok := parseState("outdated"); !ok || st != StateOutdated {
		t.Fatal("a leader's outdated state is not parsed")
	}
	if _, ok := parseState("bogus"); ok {
		t.Fatal("parsed a bogus state")
	}
}

// A visible tab tells its listeners at once; a hidden one folds changes
// into one notification per period (a timer, not animation frames).
func TestNotifierHidden(t *testing.T) {
	var hidden atomic.Bool
	var fired atomic.Int32
	n := &notifier{every: 50 * time.Millisecond, hidden: hidden.Load, fire: func() { fired.Add(1) }}
	n.kick()
	if fired.Load() != 1 {
		t.Fatal("a visible tab was not told at once")
	}
	hidden.Store(true)
	for i := 0; i < 10; i++ {
		n.kick()
	}
	if fired.Load() != 1 {
		t.Fatal("a hidden tab was told at once")
	}
	deadline := time.Now().Add(5 * time.Second)
	for fired.Load() != 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fired.Load() != 2 {
		t.Fatalf("hidden tab told %d times, want 2", fired.Load())
	}
}

func TestListeners(t *testing.T) {
	var l listeners[int]
	var got []int
	un := l.add(func(v int) { got = append(got, v) })
	l.add(func(v int) { got = append(got, -v) })
	l.call(1)
	un()
	l.call(2)
	if len(got) != 3 || got[0] != 1 || got[1] != -1 || got[2] != -2 {
		t.Fatalf("%v", got)
	}
}

// A scope long enough that a tab's channel resource (lock name, "/tab/",
// the tab's id) would pass the channel's limit is refused at Open (a
// channel drops such posts silently); the longest accepted scope's names
// fit the channel, the fenced database and the server's fencing resource.
func TestLongScope(t *testing.T) {
	for _, p := range []int{1, 12345} {
		max := MaxScope(p)
		c := goodConfig()
		c.Protocol = p
		c.Scope = strings.Repeat("s", max)
		n, err := c.Names()
		if err != nil {
			t.Fatalf("protocol %d: scope of %d bytes refused: %v", p, max, err)
		}
		id := channel.NewID()
		if len(id) != tabIDLen {
			t.Fatalf("a tab id has %d bytes, tabIDLen says %d", len(id), tabIDLen)
		}
		res := tabResource(n.Lock, id)
		if len(res) > channel.DefaultLimits.MaxResource || len(res) > idb.MaxResourceLen || len(res) > wire.MaxResourceLen {
			t.Fatalf("protocol %d: tab resource of %d bytes", p, len(res))
		}
		c.Scope += "s"
		if _, _, err := c.normalized(); !errors.Is(err, ErrConfig) {
			t.Fatalf("protocol %d: scope of %d bytes accepted: %v", p, max+1, err)
		}
	}
	if MaxScope(1) < 100 {
		t.Fatalf("MaxScope(1) = %d: scopes of a UUID or two must fit", MaxScope(1))
	}
}

func TestServerResource(t *testing.T) {
	a, err := ServerResource("ws 1#a?b.c", 1, "b1")
	if err != nil || !wire.ValidResource(a) || a != "tabfence:rt:b1:ws.201.23a.3fb.2ec:v1" {
		t.Fatalf("%q %v", a, err)
	}
	b, _ := ServerResource("ws 1#a?b.c", 1, "b2")
	c, _ := ServerResource("ws 1#a?b.c", 2, "b1")
	if a == b || a == c {
		t.Fatal("two browsers or protocols share a server resource")
	}
	if _, err := ServerResource(strings.Repeat("#", 1000), 1, "b1"); !errors.Is(err, ErrConfig) {
		t.Fatalf("too long: %v", err)
	}
}
