package harness

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/chromedp/cdproto/runtime"
)

// decode keeps chromedp's null rule for every engine: null (or undefined)
// into a T that cannot be nil is an error, not a zero value that reads as
// an answer.
func TestDecodeNullRule(t *testing.T) {
	for _, raw := range []string{"null", " null\n", ""} {
		if _, err := decode[float64]([]byte(raw)); !errors.Is(err, ErrJSNull) {
			t.Errorf("decode[float64](%q): %v, want ErrJSNull", raw, err)
		}
		if _, err := decode[string]([]byte(raw)); !errors.Is(err, ErrJSNull) {
			t.Errorf("decode[string](%q): %v, want ErrJSNull", raw, err)
		}
		if v, err := decode[*int]([]byte(raw)); err != nil || v != nil {
			t.Errorf("decode[*int](%q): %v, %v, want nil, nil", raw, v, err)
		}
		if v, err := decode[any]([]byte(raw)); err != nil || v != nil {
			t.Errorf("decode[any](%q): %v, %v, want nil, nil", raw, v, err)
		}
		if v, err := decode[[]int]([]byte(raw)); err != nil || v != nil {
			t.Errorf("decode[[]int](%q): %v, %v, want nil, nil", raw, v, err)
		}
		if v, err := decode[map[string]int]([]byte(raw)); err != nil || v != nil {
			t.Errorf("decode[map](%q): %v, %v, want nil, nil", raw, v, err)
		}
	}
	if v, err := decode[string]([]byte(`"x"`)); err != nil || v != "x" {
		t.Errorf(`decode[string]("x"): %q, %v`, v, err)
	}
	if v, err := decode[json.RawMessage]([]byte(`"a"`)); err != nil || string(v) != `"a"` {
		t.Errorf(`decode[json.RawMessage]: %s, %v`, v, err)
	}
	if v, err := decode[bool]([]byte(`false`)); err != nil || v {
		t.Errorf(`decode[bool](false): %v, %v`, v, err)
	}
}

// cdpJSON gives a top-level value CDP cannot send as JSON (it comes as
// unserializableValue) the JSON JSON.stringify and the Firefox engine give.
func TestCDPJSONUnserializable(t *testing.T) {
	for _, c := range []struct {
		ro   *runtime.RemoteObject
		want string
	}{
		{&runtime.RemoteObject{Type: "number", UnserializableValue: "NaN"}, "null"},
		{&runtime.RemoteObject{Type: "number", UnserializableValue: "Infinity"}, "null"},
		{&runtime.RemoteObject{Type: "number", UnserializableValue: "-Infinity"}, "null"},
		{&runtime.RemoteObject{Type: "number", UnserializableValue: "-0"}, "0"},
		{&runtime.RemoteObject{Type: "undefined"}, "null"},
		{&runtime.RemoteObject{Type: "number", Value: []byte("1.5")}, "1.5"},
		{&runtime.RemoteObject{Type: "object", Value: []byte(`{"a":[1]}`)}, `{"a":[1]}`},
		{nil, "null"},
	} {
		got, err := cdpJSON(c.ro)
		if err != nil || string(got) != c.want {
			t.Errorf("cdpJSON(%+v) = %s, %v; want %s", c.ro, got, err, c.want)
		}
	}
	if _, err := cdpJSON(&runtime.RemoteObject{Type: "bigint", UnserializableValue: "10n"}); !errors.Is(err, ErrNotJSON) {
		t.Errorf("BigInt: %v, want ErrNotJSON", err)
	}
}
