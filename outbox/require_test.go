package outbox

import (
	"errors"
	"reflect"
	"testing"
)

// require is a minimal stand-in for testify/require: testify v1.12.1 needs
// go.yaml.in/yaml/v3, which go.sum does not list, and go.mod is not ours.
var require requirer

type requirer struct{}

func (requirer) NoError(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v %v", err, msg)
	}
}

func (requirer) Error(t testing.TB, err error, msg ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error %v", msg)
	}
}

func (requirer) ErrorIs(t testing.TB, err, target error, msg ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v is not %v %v", err, target, msg)
	}
}

func (requirer) Equal(t testing.TB, want, got any, msg ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("want %#v, got %#v %v", want, got, msg)
	}
}

func (requirer) True(t testing.TB, ok bool, msg ...any) {
	t.Helper()
	if !ok {
		t.Fatalf("expected true %v", msg)
	}
}

func (requirer) False(t testing.TB, ok bool, msg ...any) {
	t.Helper()
	if ok {
		t.Fatalf("expected false %v", msg)
	}
}

func (requirer) Len(t testing.TB, v any, n int, msg ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		t.Fatalf("want len %d, got %d (%#v) %v", n, l, v, msg)
	}
}
