//go:build !tabfence_core

package jsapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOutboxArgs(t *testing.T) {
	d, err := DedupeArg("edit", Arg{Kind: KindString, Str: "merge"})
	require.NoError(t, err)
	require.Equal(t, "merge", string(d))
	_, err = DedupeArg("edit", Arg{Kind: KindString, Str: "guess"})
	require.EqualError(t, err, "tabfence.outbox: policies.edit.dedupe must be append, replace-latest, merge or drop-if-exists",
		"the list comes from DedupePolicies")
	_, err = DedupeArg("edit", Arg{Kind: KindUndefined})
	require.Error(t, err)

	_, err = OutboxString("name", Arg{}, true)
	require.EqualError(t, err, "tabfence.outbox: name is required")
	_, err = OutboxString("name", Arg{Kind: KindString}, true)
	require.EqualError(t, err, "tabfence.outbox: name must be a non-empty string")
	s, err := OutboxString("user", Arg{Kind: KindNull}, false)
	require.NoError(t, err)
	require.Empty(t, s)

	ms, err := MsArg("base", Arg{Kind: KindNumber, Num: 1.5})
	require.NoError(t, err)
	require.Equal(t, 1500*time.Microsecond, ms)
	_, err = MsArg("base", Arg{Kind: KindNumber, Num: -1})
	require.EqualError(t, err, "tabfence.outbox: base must be a non-negative number of milliseconds")

	v, err := SchemaVersionArg(Arg{})
	require.NoError(t, err)
	require.Equal(t, 1, v)
	for _, n := range []float64{0, 1.5, MaxSchemaVersion + 1} {
		_, err = SchemaVersionArg(Arg{Kind: KindNumber, Num: n})
		require.Error(t, err, "schemaVersion %v", n)
	}
	from, err := MigrationFrom("2", 3)
	require.NoError(t, err)
	require.Equal(t, 2, from)
	for _, k := range []string{"3", "02", "-1", "x", "12345678"} {
		_, err = MigrationFrom(k, 3)
		require.Error(t, err, "migrations key %q", k)
	}
}

// batch: {endpoint, max?, maxBytes?}: absent means one by one; anything
// else but an object with a non-empty endpoint and integers in range is a
// TypeError, never a silent fallback to single sends.
func TestBatchArgs(t *testing.T) {
	obj, str := Arg{Kind: KindObject}, func(s string) Arg { return Arg{Kind: KindString, Str: s} }
	num := func(n float64) Arg { return Arg{Kind: KindNumber, Num: n} }
	b, err := BatchArgs(Arg{}, Arg{}, Arg{}, Arg{})
	require.NoError(t, err)
	require.Equal(t, Batch{}, b)
	b, err = BatchArgs(obj, str("/api/notes/batch"), Arg{}, Arg{})
	require.NoError(t, err)
	require.Equal(t, Batch{Endpoint: "/api/notes/batch"}, b, "absent max and maxBytes: the outbox's defaults")
	b, err = BatchArgs(obj, str("https://api.example/batch"), num(25), num(1<<20))
	require.NoError(t, err)
	require.Equal(t, Batch{Endpoint: "https://api.example/batch", Max: 25, MaxBytes: 1 << 20}, b)
	_, err = BatchArgs(str("/api/notes/batch"), Arg{}, Arg{}, Arg{})
	require.EqualError(t, err, "tabfence.outbox: batch must be an object {endpoint, max?, maxBytes?}, got string")
	for _, e := range []Arg{{}, str(""), num(1)} {
		_, err = BatchArgs(obj, e, Arg{}, Arg{})
		require.Error(t, err, "endpoint %+v", e)
		require.Contains(t, err.Error(), "batch.endpoint")
	}
	bad := []Arg{num(0), num(-1), num(2.5), str("100"), {Kind: KindBoolean, Num: 1}}
	for _, m := range append(bad, num(MaxBatchMax+1)) {
		_, err = BatchArgs(obj, str("/b"), m, Arg{})
		require.EqualError(t, err, "tabfence.outbox: batch.max must be an integer from 1 to 1000", "max %+v", m)
	}
	for _, m := range append(bad, num(MaxBatchBytes+1)) {
		_, err = BatchArgs(obj, str("/b"), Arg{}, m)
		require.EqualError(t, err, "tabfence.outbox: batch.maxBytes must be an integer from 1 to 67108864", "maxBytes %+v", m)
	}
	var te *TypeError
	require.ErrorAs(t, err, &te)
}

func TestDrainArgs(t *testing.T) {
	num := func(n float64) Arg { return Arg{Kind: KindNumber, Num: n} }
	yes := Arg{Kind: KindBoolean, Num: 1}
	last, d, err := DrainArgs(Arg{}, Arg{})
	require.NoError(t, err)
	require.False(t, last)
	require.Equal(t, DefaultDrainTimeout, d)
	last, d, err = DrainArgs(yes, num(1500))
	require.NoError(t, err)
	require.True(t, last)
	require.Equal(t, 1500*time.Millisecond, d)
	for _, c := range []struct{ last, ms Arg }{
		{Arg{Kind: KindString}, Arg{}}, {Arg{}, num(0)}, {Arg{}, num(-1)}, {Arg{}, Arg{Kind: KindString}}, {Arg{}, num(1e12)},
	} {
		_, _, err := DrainArgs(c.last, c.ms)
		var te *TypeError
		require.ErrorAs(t, err, &te, "%+v", c)
	}
	on, err := BoolOption("outbox", "backgroundSync", Arg{}, true)
	require.NoError(t, err)
	require.True(t, on)
	on, err = BoolOption("outbox", "backgroundSync", Arg{Kind: KindBoolean}, true)
	require.NoError(t, err)
	require.False(t, on)
	_, err = BoolOption("outbox", "backgroundSync", num(0), true)
	require.Error(t, err)
}
