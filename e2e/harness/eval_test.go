package harness

import (
	"encoding/json"
	"errors"
	"testing"
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
