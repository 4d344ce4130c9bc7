//go:build !tabfence_core && !tabfence_noconnection

package jsapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func strs(s ...string) []Arg {
	out := make([]Arg, len(s))
	for i := range s {
		out[i] = str(s[i])
	}
	return out
}

// goodConnection is the smallest valid options object.
func goodConnection() ConnectionArgs {
	return ConnectionArgs{Options: obj(), Scope: str("ws-1"), URL: str("/realtime"),
		Replica: obj(), StoresIsArray: true, Stores: strs("issues")}
}

func TestConnectionOptionsDefaultsAndMapping(t *testing.T) {
	cfg, isFunc, err := ValidateConnection(goodConnection())
	require.NoError(t, err)
	require.False(t, isFunc)
	require.Equal(t, "ws-1", cfg.Scope)
	require.Equal(t, 1, cfg.Protocol, "protocol defaults to 1")
	require.Equal(t, 1, cfg.SchemaVersion, "replica.version defaults to 1")
	require.Equal(t, []string{"issues"}, cfg.Stores)
	u, err := cfg.URL(context.Background())
	require.NoError(t, err)
	require.Equal(t, "/realtime", u, "a string url is the URL of every dial")
	require.Zero(t, cfg.Leader.PingEvery, "absent durations leave the runtime's defaults")
	require.Nil(t, cfg.Leader.Backoff)
	require.Zero(t, cfg.StallAfter)

	a := goodConnection()
	a.URL = Arg{Kind: KindFunction}
	a.Protocol, a.Version = num(3), num(2)
	a.User, a.FencePath = str("alice"), str("/fence/")
	a.Snapshot = str("/realtime/snapshot")
	a.PingEveryMs, a.PongTimeoutMs, a.HiddenNotifyMs = num(1500), num(250), num(100)
	a.Backoff, a.BackoffBase, a.BackoffCap = obj(), num(10), num(2000)
	a.StallAfterMs = num(4000)
	a.Stores = strs("issues", "people")
	cfg, isFunc, err = ValidateConnection(a)
	require.NoError(t, err)
	require.True(t, isFunc, "a function url is the binding's to call")
	require.Nil(t, cfg.URL)
	require.Equal(t, 3, cfg.Protocol)
	require.Equal(t, 2, cfg.SchemaVersion)
	require.Equal(t, "alice", cfg.User)
	require.Equal(t, "alice", cfg.Leader.User, "the user goes into Hello")
	require.Equal(t, "/fence/", cfg.FencePath)
	require.Equal(t, "/realtime/snapshot", cfg.Snapshot, "a reset reloads from the snapshot URL")
	require.Equal(t, 1500*time.Millisecond, cfg.Leader.PingEvery)
	require.Equal(t, 250*time.Millisecond, cfg.Leader.PongTimeout)
	require.Equal(t, 100*time.Millisecond, cfg.HiddenNotify)
	require.Equal(t, 10*time.Millisecond, cfg.Leader.Backoff.Base)
	require.Equal(t, 2*time.Second, cfg.Leader.Backoff.Cap)
	require.Equal(t, 4*time.Second, cfg.StallAfter)
	require.Equal(t, []string{"issues", "people"}, cfg.Stores)
}

func TestConnectionOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*ConnectionArgs)
		want string
	}{
		{"no options", func(a *ConnectionArgs) { a.Options = Arg{} }, "expects an options object"},
		{"no scope", func(a *ConnectionArgs) { a.Scope = Arg{} }, "scope must be a non-empty string"},
		{"empty scope", func(a *ConnectionArgs) { a.Scope = str("") }, "scope must not be empty"},
		{"long scope", func(a *ConnectionArgs) { a.Scope = str(strings.Repeat("s", 300)) }, "scope is 300 bytes long"},
		{"control char scope", func(a *ConnectionArgs) { a.Scope = str("a\nb") }, "cannot name a lock"},
		{"string protocol", func(a *ConnectionArgs) { a.Protocol = str("1") }, "protocol must be a positive integer number"},
		{"zero protocol", func(a *ConnectionArgs) { a.Protocol = num(0) }, "protocol must be an integer from 1"},
		{"no url", func(a *ConnectionArgs) { a.URL = Arg{} }, "url must be a WebSocket URL"},
		{"empty url", func(a *ConnectionArgs) { a.URL = str("") }, "url must be a WebSocket URL"},
		{"number url", func(a *ConnectionArgs) { a.URL = num(1) }, "url must be a WebSocket URL"},
		{"no replica", func(a *ConnectionArgs) { a.Replica = Arg{} }, "replica must be an object"},
		{"stores not an array", func(a *ConnectionArgs) { a.StoresIsArray, a.Stores = false, nil }, "replica.stores must be a non-empty array"},
		{"no stores", func(a *ConnectionArgs) { a.Stores = nil }, "replica.stores must be a non-empty array"},
		{"store not a string", func(a *ConnectionArgs) { a.Stores = []Arg{num(1)} }, "replica.stores[0] must be a non-empty string"},
		{"empty store", func(a *ConnectionArgs) { a.Stores = strs("issues", "") }, "replica.stores[1] must not be empty"},
		{"store twice", func(a *ConnectionArgs) { a.Stores = strs("issues", "issues") }, `names "issues" twice`},
		{"too many stores", func(a *ConnectionArgs) { a.Stores = make([]Arg, MaxReplicaStores+1) }, "more than 64 stores"},
		{"fractional version", func(a *ConnectionArgs) { a.Version = num(1.5) }, "replica.version must be an integer"},
		{"zero version", func(a *ConnectionArgs) { a.Version = num(0) }, "replica.version must be an integer"},
		{"number user", func(a *ConnectionArgs) { a.User = num(7) }, "user must be a string when given"},
		{"number snapshot", func(a *ConnectionArgs) { a.Snapshot = num(7) }, "snapshot must be a string when given"},
		{"zero ping", func(a *ConnectionArgs) { a.PingEveryMs = num(0) }, "pingEveryMs must be a positive number"},
		{"negative pong", func(a *ConnectionArgs) { a.PongTimeoutMs = num(-1) }, "pongTimeoutMs must be a positive number"},
		{"NaN hidden", func(a *ConnectionArgs) { a.HiddenNotifyMs = num(nan()) }, "hiddenNotifyMs must be a positive number"},
		{"huge ping", func(a *ConnectionArgs) { a.PingEveryMs = num(1e300) }, "pingEveryMs must be a positive number"},
		{"backoff not an object", func(a *ConnectionArgs) { a.Backoff = num(5) }, "backoff must be an object"},
		{"backoff string base", func(a *ConnectionArgs) { a.Backoff, a.BackoffBase = obj(), str("1") }, "backoff.base must be a positive number"},
		{"backoff cap below base", func(a *ConnectionArgs) { a.Backoff, a.BackoffBase, a.BackoffCap = obj(), num(100), num(10) }, "backoff.cap must not be below"},
		{"short stall", func(a *ConnectionArgs) { a.StallAfterMs = num(100) }, "stallAfterMs must be 0 (no watchdog) or from 3000 to 3600000"},
		{"fractional stall", func(a *ConnectionArgs) { a.StallAfterMs = num(3000.5) }, "stallAfterMs must be a whole number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := goodConnection()
			c.edit(&a)
			_, _, err := ValidateConnection(a)
			require.Error(t, err)
			require.IsType(t, &TypeError{}, err, "a bad option is a TypeError")
			require.Contains(t, err.Error(), "tabfence.connection: ")
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func nan() float64 {
	z := 0.0
	return z / z
}

func TestMutationArgs(t *testing.T) {
	m, err := ValidateMutation(MutationArgs{Mutation: obj(), Op: str("issue.put"), Entity: str("i1"), ID: str("m-1"), HasPayload: true})
	require.NoError(t, err)
	require.Equal(t, "issue.put", m.Op)
	require.Equal(t, "i1", m.Entity)
	require.Equal(t, "m-1", m.ID)
	m, err = ValidateMutation(MutationArgs{Mutation: obj(), Op: str("issue.put"), HasPayload: true})
	require.NoError(t, err)
	require.Empty(t, m.ID, "no id: the runtime makes a random one")

	for _, c := range []struct {
		a    MutationArgs
		want string
	}{
		{MutationArgs{Mutation: str("x")}, "expects a mutation"},
		{MutationArgs{Mutation: obj(), HasPayload: true}, "op must be a non-empty string"},
		{MutationArgs{Mutation: obj(), Op: str("o"), Entity: num(1), HasPayload: true}, "entity must be a string"},
		{MutationArgs{Mutation: obj(), Op: str("o"), ID: str(""), HasPayload: true}, "id must be a non-empty string"},
		{MutationArgs{Mutation: obj(), Op: str("o"), ID: str(strings.Repeat("k", 201)), HasPayload: true}, "id must be a non-empty string of at most 200"},
		{MutationArgs{Mutation: obj(), Op: str("o")}, "payload must be"},
	} {
		_, err := ValidateMutation(c.a)
		require.ErrorContains(t, err, "tabfence.connection.mutate: "+c.want)
		require.IsType(t, &TypeError{}, err)
	}
}
