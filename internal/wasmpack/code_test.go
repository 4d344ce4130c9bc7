package wasmpack

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// codeSection wraps function bodies (instructions after an empty locals
// vector) into a code section.
func codeSection(bodies ...[]byte) []byte {
	sec := appendUleb(nil, uint64(len(bodies)))
	for _, b := range bodies {
		body := append([]byte{0}, b...) // no locals
		sec = appendUleb(sec, uint64(len(body)))
		sec = append(sec, body...)
	}
	return sec
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestFoldCode(t *testing.T) {
	sp := func(off int64) []byte {
		return cat([]byte{0x20, 1, 0xad, 0x42}, appendSleb(nil, off), []byte{0x7c, 0xa7})
	}
	uleb := func(v uint64) []byte { return appendUleb(nil, v) }
	for _, tc := range []struct {
		name     string
		in, want []byte
	}{{
		name: "load",
		in:   cat(sp(312), []byte{0x29, 3, 0, 0x1a, 0x0b}),                 // i64.load offset=0; drop
		want: cat([]byte{0x20, 1, 0x29, 3}, uleb(312), []byte{0x1a, 0x0b}), // i64.load offset=312
	}, {
		name: "load with an offset already",
		in:   cat(sp(16), []byte{0x28, 2, 8, 0x1a, 0x0b}), // i32.load offset=8
		want: []byte{0x20, 1, 0x28, 2, 24, 0x1a, 0x0b},
	}, {
		name: "store after a value computation",
		// local.get 2; i64.const 5; i64.add; i64.store offset=8
		in:   cat(sp(16), []byte{0x20, 2, 0x42, 5, 0x7c, 0x37, 3, 8, 0x0b}),
		want: []byte{0x20, 1, 0x20, 2, 0x42, 5, 0x7c, 0x37, 3, 24, 0x0b},
	}, {
		name: "store whose value loads from another folded address",
		in:   cat(sp(16), sp(40), []byte{0x29, 3, 0, 0x37, 3, 0, 0x0b}),
		want: []byte{0x20, 1, 0x20, 1, 0x29, 3, 40, 0x37, 3, 16, 0x0b},
	}, {
		name: "a call before the store: kept",
		in:   cat(sp(16), []byte{0x41, 0, 0x10, 0, 0xad, 0x37, 3, 0, 0x0b}),
	}, {
		name: "the address feeds an instruction without an offset: kept",
		in:   cat(sp(16), []byte{0x41, 0, 0x41, 8, 0xfc, 11, 0, 0x0b}), // memory.fill
	}, {
		name: "the address is the value, not the address, of a store: kept",
		in:   cat([]byte{0x20, 3}, sp(16), []byte{0x36, 2, 0, 0x0b}), // i32.store
	}, {
		name: "negative constant: kept",
		in:   cat(sp(-8), []byte{0x29, 3, 0, 0x1a, 0x0b}),
	}, {
		name: "offset would pass 2^31: kept",
		in:   cat(sp(1<<31-4), []byte{0x29, 3, 8, 0x1a, 0x0b}),
	}, {
		name: "another 64-bit base: the constant folds, the wrap stays",
		in:   []byte{0x42, 9, 0x42, 16, 0x7c, 0xa7, 0x29, 3, 0, 0x1a, 0x0b},
		want: []byte{0x42, 9, 0xa7, 0x29, 3, 16, 0x1a, 0x0b},
	}} {
		want := tc.want
		if want == nil {
			want = tc.in
		}
		got, err := foldCode(codeSection(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		assert.True(t, bytes.Equal(got, codeSection(want)), "%s:\n got % x\nwant % x", tc.name, got, codeSection(want))
	}
}

func TestFoldCodeRefusesUnknownInstructions(t *testing.T) {
	for name, body := range map[string][]byte{
		"simd":      {0xfd, 0x0c, 0x0b},
		"truncated": {0x42},
		"table op":  {0xfc, 12, 0, 0, 0x0b},
	} {
		_, err := foldCode(codeSection(body))
		assert.Error(t, err, "%s: foldCode succeeded", name)
	}
}
