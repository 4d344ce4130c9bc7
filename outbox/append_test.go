package outbox

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// AppendRules carries what Enqueue would put into a plain append's record:
// the session, the schema version, the inline limit, and per operation
// type its maxAttempts and whether a keyed operation is a plain append.
// With ids or a clock the app supplies, or without a session, there are no
// rules: every enqueue goes through Enqueue.
func TestAppendRules(t *testing.T) {
	ob, err := New(Config{Name: "r", Store: NewMemStore(), Transport: TransportFunc(nil), MaxAttempts: 7,
		Policies: map[string]Policy{
			"comment": {Dedupe: Append, MaxAttempts: 3},
			"title":   {Dedupe: ReplaceLatest},
			"tags":    {Dedupe: Merge, Merge: func(a, b []byte) ([]byte, error) { return b, nil }},
			"star":    {Dedupe: DropIfExists},
			"guess":   {Dedupe: "guess"},
		}})
	require.NoError(t, err)
	if _, ok := ob.AppendRules(); ok {
		t.Fatal("rules without a session")
	}
	s := Session{UserID: "alice", TenantID: "t", AuthGeneration: 4}
	ob.Login(context.Background(), s)
	rules, ok := ob.AppendRules()
	want := AppendRules{Session: s, SchemaVersion: 1, InlineLimit: 64 << 10, Types: map[string]AppendType{
		"comment": {MaxAttempts: 3, Keyed: true}, "title": {MaxAttempts: 7}, "tags": {MaxAttempts: 7}, "star": {MaxAttempts: 7},
	}}
	if !ok || !reflect.DeepEqual(rules, want) {
		t.Fatalf("rules %+v %v\nwant %+v", rules, ok, want)
	}
	// What AppendRules calls a plain append is what Enqueue appends
	// without reading the queue.
	for name, typ := range rules.Types {
		if pol := ob.cfg.Policies[name]; pol.ReadsQueue("k") == typ.Keyed || pol.ReadsQueue("") {
			t.Fatalf("%s: Keyed %v, policy %v", name, typ.Keyed, pol.Dedupe)
		}
	}

	for _, mod := range []func(*Config){
		func(c *Config) { c.NewID = seqIDs() },
		func(c *Config) { c.Clock = &fakeClock{now: t0} },
	} {
		cfg := ob.cfg
		cfg.NewID, cfg.Clock = nil, nil
		mod(&cfg)
		o, err := New(cfg)
		require.NoError(t, err)
		o.Login(context.Background(), s)
		if _, ok := o.AppendRules(); ok {
			t.Fatal("rules with the app's ids or clock")
		}
	}
}

// orderStore records when Delete runs, relative to the session hook.
type orderStore struct {
	*MemStore
	log *[]string
}

func (s orderStore) Delete(ctx context.Context, f Filter) (int, error) {
	*s.log = append(*s.log, "delete "+f.UserID)
	return s.MemStore.Delete(ctx, f)
}

// The session hook runs after every Login and Logout with the new session
// in place, and before Logout's purge: a builder of appends outside Go
// never writes a record of the user being purged after the purge.
func TestSessionHookBeforePurge(t *testing.T) {
	var log []string
	ob, err := New(Config{Name: "h", Store: orderStore{NewMemStore(), &log}, Transport: TransportFunc(nil),
		Policies: map[string]Policy{"comment": {Dedupe: Append}}})
	require.NoError(t, err)
	ob.OnSessionChange(func() {
		_, ok := ob.AppendRules()
		log = append(log, "hook "+ob.Session().UserID+map[bool]string{true: " rules", false: " none"}[ok])
	})
	ob.Login(context.Background(), Session{UserID: "alice"})
	_, err = ob.Logout(context.Background(), true)
	require.NoError(t, err)
	ob.Login(context.Background(), Session{UserID: "bob"})
	_, err = ob.Logout(context.Background(), false)
	require.NoError(t, err)
	want := []string{"hook alice rules", "hook  none", "delete alice", "hook bob rules", "hook  none"}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("order %q\nwant  %q", log, want)
	}
}

// ParseAppended reads the loader's batches; malformed entries are counted
// and skipped, never delivered.
func TestParseAppended(t *testing.T) {
	id1, id2 := "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	var got []string
	n := ParseAppended("1,"+id1+",,1700000000123;12,"+id2+",0123456789abcdef,5;"+
		"x,"+id1+",,1;"+ // key not a number
		"1,"+id1+",,;"+ // no time
		"1,ABCDEF,,1;"+ // not an id
		"1,"+id1+",zz,1;"+ // not a key hash
		"1,"+id1+",,1,extra;"+
		"1,"+id1+";"+
		";"+
		"1,"+id1+",,12345678901234567890", // beyond 2^53
		func(key int, r AppendedRecord) {
			got = append(got, r.ID[:4]+"/"+r.OperationKeyHash+"/"+r.At.UTC().Format(time.RFC3339Nano)+"/"+string(rune('0'+key%10)))
		})
	want := []string{"0123//2023-11-14T22:13:20.123Z/1", "fedc/0123456789abcdef/1970-01-01T00:00:00.005Z/2"}
	if !reflect.DeepEqual(got, want) || n != 8 {
		t.Fatalf("got %q, %d dropped\nwant %q, 8", got, n, want)
	}
	if ParseAppended("", func(int, AppendedRecord) { t.Fatal("an entry in nothing") }) != 0 {
		t.Fatal("dropped entries of nothing")
	}
}

func TestHashKey(t *testing.T) {
	if HashKey("") != "" {
		t.Fatal("a hash of no key")
	}
	// sha256("k") = 8254c329a92850f6d539dd376f4816ee2764517da5e0235514af433164480d7a
	if got := HashKey("k"); got != "8254c329a92850f6" {
		t.Fatalf("HashKey(k) = %s", got)
	}
}
