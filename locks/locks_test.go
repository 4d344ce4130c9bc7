package locks

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
)

func TestName(t *testing.T) {
	good := []struct {
		scope string
		proto int
		want  string
	}{
		{"s", 1, "tabfence:s:v1"},
		{"workspace-42", 7, "tabfence:workspace-42:v7"},
		{"a:b", 2, "tabfence:a:b:v2"},
		{"ünïcode ✓", 1, "tabfence:ünïcode ✓:v1"},
		{strings.Repeat("x", MaxScopeLen), 1, "tabfence:" + strings.Repeat("x", MaxScopeLen) + ":v1"},
	}
	for _, c := range good {
		got, err := Name(c.scope, c.proto)
		assert.NoError(t, err, "Name(%q,%d)", c.scope, c.proto)
		assert.Equal(t, c.want, got, "Name(%q,%d)", c.scope, c.proto)
	}
	bad := []struct {
		scope string
		proto int
	}{
		{"", 1},
		{"s", 0},
		{"s", -3},
		{strings.Repeat("x", MaxScopeLen+1), 1},
		{"a\nb", 1},
		{"tab\there", 1},
		{"nul\x00", 1},
		{"del\x7f", 1},
		{"c1\u0085", 1},
		{"bad\xffutf8", 1},
	}
	for _, c := range bad {
		got, err := Name(c.scope, c.proto)
		assert.ErrorIs(t, err, ErrInvalidName, "Name(%q,%d) = %q, %v; want ErrInvalidName", c.scope, c.proto, got, err)
		assert.Equal(t, "", got, "Name(%q,%d) = %q, %v; want ErrInvalidName", c.scope, c.proto, got, err)
	}
}

func TestNameVersionsDiffer(t *testing.T) {
	v1, _ := Name("s", 1)
	v2, _ := Name("s", 2)
	require.NotEqual(t, v2, v1, "protocol versions must give different lock names")
}

func TestOptionsValidate(t *testing.T) {
	valid := []Options{{}, {Mode: Shared}, {IfAvailable: true}, {Mode: Shared, IfAvailable: true}, {Steal: true}}
	for _, o := range valid {
		assert.NoError(t, o.Validate(), "%+v", o)
	}
	invalid := []Options{{Steal: true, IfAvailable: true}, {Steal: true, Mode: Shared}, {Mode: 7}, {Mode: -1}}
	for _, o := range invalid {
		err := o.Validate()
		assert.ErrorIs(t, err, ErrInvalidOptions, "%+v: got %v, want ErrInvalidOptions", o, err)
	}
}

func TestModeStrings(t *testing.T) {
	for _, m := range []Mode{Exclusive, Shared} {
		back, ok := ParseMode(m.String())
		assert.True(t, ok, "round trip of %v", m)
		assert.Equal(t, m, back, "round trip of %v", m)
	}
	require.Equal(t, "exclusive", Exclusive.String(), "mode strings")
	require.Equal(t, "shared", Shared.String(), "mode strings")
	require.Equal(t, "Mode(9)", Mode(9).String(), "mode strings")
	_, ok := ParseMode("EXCLUSIVE")
	require.False(t, ok, "ParseMode is exact")
}

func TestReasonStrings(t *testing.T) {
	want := map[Reason]string{ReasonResigned: "resigned", ReasonClosed: "closed", ReasonStolen: "stolen",
		ReasonFenced: "fenced", ReasonError: "error", Reason(42): "Reason(42)"}
	for r, s := range want {
		assert.Equal(t, s, r.String(), "%d", int(r))
	}
}

func TestErrors(t *testing.T) {
	require.ErrorIs(t, ErrUnavailable, jsglue.ErrUnavailable, "ErrUnavailable must match jsglue.ErrUnavailable")
	require.ErrorIs(t, ErrUnavailable, ErrUnavailable, "ErrUnavailable must match jsglue.ErrUnavailable")
	require.NotErrorIs(t, ErrStolen, jsglue.ErrUnavailable, "sentinels are distinct")
	require.NotErrorIs(t, ErrStolen, ErrClosed, "sentinels are distinct")
	require.Equal(t, "NotSupportedError", jsglue.NameOf(ErrUnavailable), "JS names")
	require.Equal(t, "LockStolenError", jsglue.NameOf(ErrStolen), "JS names")
	err := Options{Steal: true, IfAvailable: true}.Validate()
	require.Equal(t, "NotSupportedError", jsglue.NameOf(err), "detail error: %v", err)
	require.Contains(t, err.Error(), "ifAvailable", "detail error: %v", err)
	fence := errors.New("server: stale token 3 < 5")
	le := &LostError{Reason: ReasonFenced, Resource: "r", Token: 3, Err: fence}
	require.ErrorIs(t, le, ErrFenced, "LostError matching")
	require.ErrorIs(t, le, fence, "LostError matching")
	require.NotErrorIs(t, le, ErrStolen, "LostError matching")
	s := le.Error()
	require.Contains(t, s, "fenced")
	require.Contains(t, s, "token 3")
	require.Contains(t, s, "stale token")
	require.Equal(t, "LostLeadershipError", jsglue.NameOf(le))
	pe := panicErr("OnLeader", errors.New("boom"))
	require.Contains(t, pe.Error(), "OnLeader: boom", pe)
	require.Error(t, errors.Unwrap(pe), pe)
}

func TestClassify(t *testing.T) {
	cases := []struct {
		cause error
		want  Reason
	}{
		{ErrStolen, ReasonStolen},
		{ErrClosed, ReasonClosed},
		{&LostError{Reason: ReasonResigned}, ReasonResigned},
		{&LostError{Reason: ReasonFenced, Err: errors.New("stale")}, ReasonFenced},
		{errors.New("idb down"), ReasonError},
		{context.Canceled, ReasonError},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, classify(c.cause).Reason, "%v", c.cause)
	}
}

func TestSnapshot(t *testing.T) {
	s := Snapshot{Held: []Info{{Name: "a"}}, Pending: []Info{{Name: "a"}, {Name: "b"}, {Name: "a"}}}
	require.True(t, s.Holds("a"), s)
	require.False(t, s.Holds("b"), s)
	require.Equal(t, 2, s.Waiting("a"), s)
	require.Equal(t, 0, s.Waiting("c"), s)
}

func TestRequestValidatesBeforeJS(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	require.ErrorIs(t, Request(ctx, "x", Options{Steal: true, Mode: Shared}, noop), ErrInvalidOptions)
	require.ErrorIs(t, Request(ctx, "x", Options{}, nil), ErrInvalidOptions)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, Request(cctx, "x", Options{}, noop), context.Canceled)
}

func TestRunFnRecovers(t *testing.T) {
	err := runFn(context.Background(), func(context.Context) error { panic("kaboom") })
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" {
		t.Fatal(err)
	}
}

func TestRandomID(t *testing.T) {
	a, b := randomID(), randomID()
	require.Len(t, a, 32)
	require.NotEqual(t, b, a)
	require.Equal(t, "", strings.Trim(a, "0123456789abcdef"))
}
