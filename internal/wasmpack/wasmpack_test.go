package wasmpack

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type seg struct {
	off  int64
	data string
}

// module builds a wasm binary: a custom section, a data section with segs in
// the given order, and a trailing custom section.
func module(segs []seg, flags byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	custom := append(appendUleb(nil, 4), "test"...)
	custom = append(custom, 1, 2, 3)
	b = append(b, 0)
	b = appendUleb(b, uint64(len(custom)))
	b = append(b, custom...)
	var d []byte
	d = appendUleb(d, uint64(len(segs)))
	for _, s := range segs {
		d = append(d, flags, 0x41)
		d = appendSleb(d, s.off)
		d = append(d, 0x0b)
		d = appendUleb(d, uint64(len(s.data)))
		d = append(d, s.data...)
	}
	b = append(b, sectionData)
	b = appendUleb(b, uint64(len(d)))
	b = append(b, d...)
	b = append(b, 0)
	b = appendUleb(b, uint64(len(custom)))
	return append(b, custom...)
}

func segments(t *testing.T, m []byte) []segment {
	t.Helper()
	r := Reader{B: m, I: 8}
	for r.I < len(m) {
		id := r.Byte()
		size := int(r.ULEB())
		if id == sectionData {
			s, err := parseData(m[r.I : r.I+size])
			require.NoError(t, err)
			return s
		}
		r.I += size
	}
	t.Fatal("no data section")
	return nil
}

func TestPackKeepsMemoryAndMergesSmallGaps(t *testing.T) {
	big := strings.Repeat("x", 300)
	edge := int64(103 + MaxGap) // exactly MaxGap zeros after "abc": merged
	in := module([]seg{
		{edge + 4 + MaxGap + 1, "far"}, // one zero too many: stays apart
		{100, "abc"},                   // out of order on purpose
		{64, big[:20]},                 // 16 zeros before "abc": merged
		{edge, "edge"},
		{1 << 20, "high offset"}, // multi-byte LEB offset
		{200000, strings.Repeat("\x00y", 3)},
	}, 0)
	out, err := Pack(in)
	require.NoError(t, err)
	mi, err := Memory(in)
	require.NoError(t, err)
	mo, err := Memory(out)
	require.NoError(t, err)
	require.True(t, bytes.Equal(mi, mo), "initial memory changed")
	got := segments(t, out)
	// 64..edge+4 as one, then "far", 200000 and 1<<20 apart.
	if len(got) != 4 {
		for _, s := range got {
			t.Logf("segment at %d, %d bytes", s.offset, len(s.data))
		}
		t.Fatalf("%d segments, want 4", len(got))
	}
	// Sections other than data are kept byte for byte, in order.
	require.True(t, bytes.HasPrefix(out, in[:8+2+8]), "other sections changed")
	require.True(t, bytes.HasSuffix(out, in[len(in)-9:]), "other sections changed")
	// Packing is idempotent.
	again, err := Pack(out)
	require.NoError(t, err, "second pack changed the module (err %v)", err)
	require.True(t, bytes.Equal(again, out), "second pack changed the module (err %v)", err)
}

func TestPackRefusesWhatItCannotKeepExact(t *testing.T) {
	for name, m := range map[string][]byte{
		"overlap":    module([]seg{{10, "abcdef"}, {12, "zz"}}, 0),
		"passive":    module([]seg{{10, "abc"}}, 1),
		"not wasm":   []byte("\x7fELF...."),
		"negative":   module([]seg{{-8, "abc"}}, 0),
		"truncated":  module([]seg{{10, "abc"}}, 0)[:20],
		"no section": []byte("\x00asm\x01\x00\x00\x00"),
	} {
		_, err := Pack(m)
		assert.Error(t, err, "%s: Pack succeeded", name)
	}
}
