package wasmpack

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// Tables of the fake pctab below (a table: zigzag value delta, pc delta,
// ..., then 0), at their offsets from the pctab's start.
const (
	tabSP   = 1 // pcsp of both functions; also the pcfile of function 1
	tabLn0  = 4 // pcln of function 0
	tabLn1  = 8 // pcln of function 1, a two-pair table
	tabData = 14
)

// fakePCLN lays out, at address 16 of a memory, a pcHeader, a functab of
// two functions, their _func records (two pcdata tables each) and a
// pctab, as Go 1.20+ does on wasm.
func fakePCLN() (mem []byte, funcs [2]int, pctab int) {
	const hdr = 16
	mem = make([]byte, 512)
	copy(mem[hdr:], pclnMagic)
	put64 := func(at, v int) { binary.LittleEndian.PutUint64(mem[at:], uint64(v)) }
	put32 := func(at int, v uint32) { binary.LittleEndian.PutUint32(mem[at:], v) }
	const functab = hdr + 72 // pclnOffset 72
	put64(hdr+8, 2)          // nfunc
	put64(hdr+64, 72)        // pclnOffset
	funcs = [2]int{functab + 24, functab + 24 + 52}
	for k, f := range funcs {
		put32(functab+8*k, uint32(k*16))        // entryoff
		put32(functab+8*k+4, uint32(f-functab)) // funcoff, from the functab
		put32(f+funcPCSP, tabSP)
		put32(f+funcNPCData, 2)
		put32(f+funcPCData, tabData)
		put32(f+funcPCData+4, 0) // no table
	}
	put32(funcs[0]+funcPCFile, 0) // none
	put32(funcs[0]+funcPCLn, tabLn0)
	put32(funcs[1]+funcPCFile, tabSP) // shares the pcsp table's bytes
	put32(funcs[1]+funcPCLn, tabLn1)
	pctab = funcs[1] + 52
	put64(hdr+56, pctab-hdr) // pctabOffset
	copy(mem[pctab+tabSP:], []byte{0x02, 0x04, 0x00})
	copy(mem[pctab+tabLn0:], []byte{0x06, 0x08, 0x00})
	copy(mem[pctab+tabLn1:], []byte{0x84, 0x01, 0x10, 0x02, 0x03, 0x00}) // a two-byte varint
	copy(mem[pctab+tabData:], []byte{0x01, 0x20, 0x00})
	return mem, funcs, pctab
}

func TestStripLinesDropsOnlyLineAndFileTables(t *testing.T) {
	mem, funcs, pctab := fakePCLN()
	before := bytes.Clone(mem)
	st, err := stripLines(mem)
	require.NoError(t, err)
	require.Equal(t, 2, st.Funcs, "stats %+v", st)
	require.Equal(t, 3+3+6, st.TableBytes, "stats %+v", st)
	require.Equal(t, 3+6, st.ZeroedBytes, "stats %+v", st)
	u32 := func(at int) uint32 { return binary.LittleEndian.Uint32(mem[at:]) }
	for _, f := range funcs {
		require.Equal(t, uint32(0), u32(f+funcPCFile), "func at %d keeps pcfile %d pcln %d", f, u32(f+funcPCFile), u32(f+funcPCLn))
		require.Equal(t, uint32(0), u32(f+funcPCLn), "func at %d keeps pcfile %d pcln %d", f, u32(f+funcPCFile), u32(f+funcPCLn))
		require.Equal(t, uint32(tabSP), u32(f+funcPCSP), "func at %d: kept offsets changed", f)
		require.Equal(t, uint32(tabData), u32(f+funcPCData), "func at %d: kept offsets changed", f)
	}
	// The line tables are zeros; the tables the runtime runs on, among
	// them the one a pcfile shared, are as they were.
	require.True(t, bytes.Equal(mem[pctab+tabLn0:pctab+tabLn0+3], make([]byte, 3)), "line tables not zeroed: % x", mem[pctab:pctab+20])
	require.True(t, bytes.Equal(mem[pctab+tabLn1:pctab+tabLn1+6], make([]byte, 6)), "line tables not zeroed: % x", mem[pctab:pctab+20])
	require.True(t, bytes.Equal(mem[pctab+tabSP:pctab+tabSP+3], before[pctab+tabSP:pctab+tabSP+3]), "a kept table changed")
	require.True(t, bytes.Equal(mem[pctab+tabData:pctab+tabData+3], before[pctab+tabData:pctab+tabData+3]), "a kept table changed")
	// Nothing else changed.
	for i := range mem {
		inTables := i >= pctab+tabLn0 && i < pctab+tabLn1+6
		inOffsets := false
		for _, f := range funcs {
			if i >= f+funcPCFile && i < f+funcPCLn+4 {
				inOffsets = true
			}
		}
		if mem[i] != before[i] && !inTables && !inOffsets {
			t.Fatalf("byte %d changed", i)
		}
	}
}

func TestStripLinesRefusesWhatItDoesNotUnderstand(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(mem []byte, funcs [2]int, pctab int) []byte
		want string
	}{
		{"no pclntab", func(mem []byte, _ [2]int, _ int) []byte { mem[16] = 0; return mem }, "no pclntab"},
		{"two", func(mem []byte, _ [2]int, _ int) []byte { copy(mem[400:], pclnMagic); return mem }, "two pclntab"},
		{"header out of range", func(mem []byte, _ [2]int, _ int) []byte {
			binary.LittleEndian.PutUint64(mem[16+56:], 1<<40)
			return mem
		}, "out of range"},
		{"not a _func", func(mem []byte, funcs [2]int, _ int) []byte {
			binary.LittleEndian.PutUint32(mem[funcs[1]+funcNPCData:], 1000)
			return mem
		}, "does not look like"},
		{"table off memory", func(mem []byte, funcs [2]int, pctab int) []byte {
			binary.LittleEndian.PutUint32(mem[funcs[0]+funcPCLn:], uint32(len(mem)-pctab-2))
			mem[len(mem)-2], mem[len(mem)-1] = 0x02, 0x04 // a pair, never ended
			return mem
		}, "runs off memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, funcs, pctab := fakePCLN()
			mem = tc.edit(mem, funcs, pctab)
			before := bytes.Clone(mem)
			_, err := stripLines(mem)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, bytes.Equal(mem, before), "a refused strip changed memory")
		})
	}
}

func TestStripLinesModule(t *testing.T) {
	mem, _, _ := fakePCLN()
	m := module([]seg{{0, string(mem)}}, 0)
	out, st, err := StripLines(m)
	require.NoError(t, err)
	require.Equal(t, 2, st.Funcs, "stats %+v", st)
	got, err := Memory(out)
	require.NoError(t, err)
	want, err := StrippedMemory(m)
	require.NoError(t, err)
	// (Equal but for trailing zeros: a segment ends at its last non-zero byte.)
	require.True(t, bytes.Equal(bytes.TrimRight(want, "\x00"), bytes.TrimRight(got, "\x00")), "StripLines' memory is not StrippedMemory's")
	// The sections around the data section are kept byte for byte.
	require.True(t, bytes.Equal(out[:8+1+1+8], m[:8+1+1+8]), "other sections changed")
	require.True(t, bytes.HasSuffix(out, m[len(m)-9:]), "other sections changed")
}

func TestSegmentsOfSplitsOnlyLongZeroRuns(t *testing.T) {
	mem := make([]byte, 3*MaxGap)
	mem[10], mem[10+MaxGap], mem[12+2*MaxGap] = 1, 2, 3 // gaps of MaxGap-1 and MaxGap+1
	segs := segmentsOf(mem)
	require.Len(t, segs, 2, "segments %+v", segs)
	require.Equal(t, uint32(10), segs[0].offset, "segments %+v", segs)
	require.Len(t, segs[0].data, MaxGap+1, "segments %+v", segs)
	require.Equal(t, uint32(12+2*MaxGap), segs[1].offset, "segments %+v", segs)
	require.Len(t, segs[1].data, 1, "segments %+v", segs)
}
