package locks

import (
	"context"
	"errors"
	"strings"
	"testing"

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
		if err != nil || got != c.want {
			t.Errorf("Name(%q,%d) = %q, %v; want %q", c.scope, c.proto, got, err, c.want)
		}
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
		if got, err := Name(c.scope, c.proto); !errors.Is(err, ErrInvalidName) || got != "" {
			t.Errorf("Name(%q,%d) = %q, %v; want ErrInvalidName", c.scope, c.proto, got, err)
		}
	}
}

func TestNameVersionsDiffer(t *testing.T) {
	v1, _ := Name("s", 1)
	v2, _ := Name("s", 2)
	if v1 == v2 {
		t.Fatal("protocol versions must give different lock names")
	}
}

func TestOptionsValidate(t *testing.T) {
	valid := []Options{{}, {Mode: Shared}, {IfAvailable: true}, {Mode: Shared, IfAvailable: true}, {Steal: true}}
	for _, o := range valid {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	invalid := []Options{{Steal: true, IfAvailable: true}, {Steal: true, Mode: Shared}, {Mode: 7}, {Mode: -1}}
	for _, o := range invalid {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: got %v, want ErrInvalidOptions", o, err)
		}
	}
}

func TestModeStrings(t *testing.T) {
	for _, m := range []Mode{Exclusive, Shared} {
		back, ok := ParseMode(m.String())
		if !ok || back != m {
			t.Errorf("round trip of %v", m)
		}
	}
	if Exclusive.String() != "exclusive" || Shared.String() != "shared" || Mode(9).String() != "Mode(9)" {
		t.Fatal("mode strings")
	}
	if _, ok := ParseMode("EXCLUSIVE"); ok {
		t.Fatal("ParseMode is exact")
	}
}

func TestReasonStrings(t *testing.T) {
	want := map[Reason]string{ReasonResigned: "resigned", ReasonClosed: "closed", ReasonStolen: "stolen",
		ReasonFenced: "fenced", ReasonError: "error", Reason(42): "Reason(42)"}
	for r, s := range want {
		if r.String() != s {
			t.Errorf("%d: %q want %q", int(r), r.String(), s)
		}
	}
}

func TestErrors(t *testing.T) {
	if !errors.Is(ErrUnavailable, jsglue.ErrUnavailable) || !errors.Is(ErrUnavailable, ErrUnavailable) {
		t.Fatal("ErrUnavailable must match jsglue.ErrUnavailable")
	}
	if errors.Is(ErrStolen, jsglue.ErrUnavailable) || errors.Is(ErrStolen, ErrClosed) {
		t.Fatal("sentinels are distinct")
	}
	if jsglue.NameOf(ErrUnavailable) != "NotSupportedError" || jsglue.NameOf(ErrStolen) != "LockStolenError" {
		t.Fatal("JS names")
	}
	err := Options{Steal: true, IfAvailable: true}.Validate()
	if jsglue.NameOf(err) != "NotSupportedError" || !strings.Contains(err.Error(), "ifAvailable") {
		t.Fatalf("detail error: %v %s", err, jsglue.NameOf(err))
	}
	fence := errors.New("server: stale token 3 < 5")
	le := &LostError{Reason: ReasonFenced, Resource: "r", Token: 3, Err: fence}
	if !errors.Is(le, ErrFenced) || !errors.Is(le, fence) || errors.Is(le, ErrStolen) {
		t.Fatal("LostError matching")
	}
	if s := le.Error(); !strings.Contains(s, "fenced") || !strings.Contains(s, "token 3") || !strings.Contains(s, "stale token") {
		t.Fatal(s)
	}
	if jsglue.NameOf(le) != "LostLeadershipError" {
		t.Fatal(jsglue.NameOf(le))
	}
	pe := panicErr("OnLeader", errors.New("boom"))
	if !strings.Contains(pe.Error(), "OnLeader: boom") || errors.Unwrap(pe) == nil {
		t.Fatal(pe)
	}
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
		if got := classify(c.cause); got.Reason != c.want {
			t.Errorf("%v: %v want %v", c.cause, got.Reason, c.want)
		}
	}
}

func TestSnapshot(t *testing.T) {
	s := Snapshot{Held: []Info{{Name: "a"}}, Pending: []Info{{Name: "a"}, {Name: "b"}, {Name: "a"}}}
	if !s.Holds("a") || s.Holds("b") || s.Waiting("a") != 2 || s.Waiting("c") != 0 {
		t.Fatal(s)
	}
}

func TestRequestValidatesBeforeJS(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	if err := Request(ctx, "x", Options{Steal: true, Mode: Shared}, noop); !errors.Is(err, ErrInvalidOptions) {
		t.Fatal(err)
	}
	if err := Request(ctx, "x", Options{}, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Request(cctx, "x", Options{}, noop); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
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
	if len(a) != 32 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatal(a, b)
	}
}
