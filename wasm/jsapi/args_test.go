package jsapi

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/locks"
)

func str(s string) Arg  { return Arg{Kind: KindString, Str: s} }
func num(n float64) Arg { return Arg{Kind: KindNumber, Num: n} }
func fn() Arg           { return Arg{Kind: KindFunction} }
func obj() Arg          { return Arg{Kind: KindObject} }
func of(k Kind) Arg     { return Arg{Kind: k} }
func good() ElectArgs {
	return ElectArgs{Options: obj(), Scope: str("notes"), Protocol: num(1), OnLeader: fn()}
}

func TestValidateElectAcceptsGoodOptions(t *testing.T) {
	a := good()
	a.Resource, a.OwnerID, a.OnLost = str("ws-1"), str("tab-7"), fn()
	o, err := ValidateElect(a)
	require.NoError(t, err)
	require.Equal(t, ElectOptions{Scope: "notes", Resource: "ws-1", OwnerID: "tab-7", Protocol: 1, HasOnLeader: true, HasOnLost: true}, o)
	a.OnFollower = of(KindNull) // null means "not given", as in most DOM APIs
	_, err = ValidateElect(a)
	require.NoError(t, err)
}

func TestValidateElectRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*ElectArgs)
		want   string // part of the message
	}{
		{"no options", func(a *ElectArgs) { a.Options = of(KindUndefined) }, "expects an options object"},
		{"missing scope", func(a *ElectArgs) { a.Scope = of(KindUndefined) }, "scope must be a non-empty string, got undefined"},
		{"empty scope", func(a *ElectArgs) { a.Scope = str("") }, "scope must not be empty"},
		{"huge scope", func(a *ElectArgs) { a.Scope = str(strings.Repeat("x", 300)) }, "limit is 256"},
		{"long scope", func(a *ElectArgs) { a.Scope = str(strings.Repeat("x", 201)) }, "cannot name a lock"},
		{"control character in scope", func(a *ElectArgs) { a.Scope = str("a\nb") }, "control character"},
		{"numeric scope", func(a *ElectArgs) { a.Scope = num(3) }, "got number"},
		{"missing protocol", func(a *ElectArgs) { a.Protocol = of(KindUndefined) }, "protocol must be a positive integer number, got undefined"},
		{"string protocol", func(a *ElectArgs) { a.Protocol = str("2") }, "got string"},
		{"zero protocol", func(a *ElectArgs) { a.Protocol = num(0) }, "got 0"},
		{"negative protocol", func(a *ElectArgs) { a.Protocol = num(-1) }, "got -1"},
		{"fractional protocol", func(a *ElectArgs) { a.Protocol = num(1.5) }, "got 1.5"},
		{"NaN protocol", func(a *ElectArgs) { a.Protocol = num(math.NaN()) }, "got NaN"},
		{"huge protocol", func(a *ElectArgs) { a.Protocol = num(1e12) }, "got 1e+12"},
		{"bigint protocol", func(a *ElectArgs) { a.Protocol = of(KindBigInt) }, "got bigint"},
		{"onLeader not a function", func(a *ElectArgs) { a.OnLeader = str("x") }, "onLeader must be a function"},
		{"onLost not a function", func(a *ElectArgs) { a.OnLost = obj() }, "onLost must be a function"},
		{"empty resource", func(a *ElectArgs) { a.Resource = str("") }, "resource must not be empty"},
		{"ownerID number", func(a *ElectArgs) { a.OwnerID = num(1) }, "ownerID must be a string"},
	}
	for _, c := range cases {
		a := good()
		c.mutate(&a)
		_, err := ValidateElect(a)
		var te *TypeError
		require.ErrorAs(t, err, &te, c.name)
		assert.Equal(t, "TypeError", te.JSName(), c.name)
		assert.True(t, strings.HasPrefix(te.Msg, "tabfence.elect: "), "%s: %q", c.name, te.Msg)
		assert.Contains(t, te.Msg, c.want, c.name)
	}
}

func TestKindNamesMatchConstants(t *testing.T) {
	require.Equal(t, "bigint", KindBigInt.String(), "kind names out of step with the constants")
	require.Equal(t, "unknown", Kind(99).String())
}

func TestQuoteEscapesWhatWouldGarbleAMessage(t *testing.T) {
	for in, want := range map[string]string{
		"plain":         `"plain"`,
		`a"b`:           `"a\"b"`,
		`back\slash`:    `"back\\slash"`,
		"nl\nx\x00\x7f": `"nl\nx\x00\x7f"`,
		"\t\r":          `"\t\r"`,
		"ünïcode":       `"ünïcode"`,
	} {
		assert.Equal(t, want, Quote(in), "Quote(%q)", in)
	}
}

func TestStallAfterArg(t *testing.T) {
	yes, no := Arg{Kind: KindBoolean, Num: 1}, Arg{Kind: KindBoolean}
	for _, c := range []struct {
		a      Arg
		fenced bool
		want   time.Duration
		err    string
	}{
		{of(KindUndefined), false, 0, ""}, {of(KindNull), true, 0, ""}, {no, false, 0, ""}, {num(0), false, 0, ""},
		{yes, true, locks.DefaultStallAfter, ""},
		{num(3000), true, 3 * time.Second, ""}, {num(3600000), true, time.Hour, ""},
		{num(2999), true, 0, "from 3000 to 3600000"}, {num(3600001), true, 0, "from 3000"},
		{num(3000.5), true, 0, "whole number"}, {num(math.NaN()), true, 0, "whole number"}, {num(-5000), true, 0, "whole number"},
		{str("5000"), true, 0, "number of milliseconds or a boolean, got string"},
		{yes, false, 0, "needs a fenced election"}, {num(5000), false, 0, "needs a fenced election"},
	} {
		d, err := StallAfterArg("elect", c.a, c.fenced)
		if c.err == "" {
			assert.NoError(t, err, "%+v fenced %v", c.a, c.fenced)
			assert.Equal(t, c.want, d, "%+v fenced %v", c.a, c.fenced)
			continue
		}
		var te *TypeError
		assert.ErrorAs(t, err, &te, "%+v fenced %v", c.a, c.fenced)
		assert.ErrorContains(t, err, c.err, "%+v fenced %v", c.a, c.fenced)
	}
}
