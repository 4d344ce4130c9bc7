// Package wasmpack rewrites the data and code sections of a Go-built
// WebAssembly module so that it compresses better: Pack without changing
// the memory it initializes or what its code does, and StripLines (see
// lines.go) by dropping the file and line tables of Go's function table,
// which only stack traces read.
//
// Why: Go's linker splits the data section into one segment per run of
// non-zero bytes whenever it finds 8 or more zeros, which minimizes the raw
// file: tens of thousands of segments. Each segment header carries
// an absolute offset, and those offsets compress badly, while the zero runs
// they skip would compress to almost nothing. Users download the module with
// brotli, so the raw size is the wrong thing to minimize: writing the zeros
// back as a few segments compresses better for more raw bytes, which only
// the browser's memory copy at instantiation sees (docs/build-notes.md has
// the figures).
//
// Pack also shortens Go's address arithmetic in the code section (see
// foldCode) and keeps every other section byte for byte. It sorts the
// active data segments by offset (they never overlap, so their order does
// not matter), then merges neighbours whose gap is at most MaxGap zero
// bytes. It refuses
// (returns an error) anything it does not fully understand: passive
// segments, other memories, offsets that are not constants, overlaps,
// instructions it cannot decode.
package wasmpack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
)

// MaxGap is the largest run of zero bytes between two segments that Pack
// writes out to merge them. Larger gaps stay implicit.
const MaxGap = 256

const sectionData = 11

type segment struct {
	offset uint32
	data   []byte
}

// Pack returns module with its data section repacked; see the package
// comment. It returns an error, and no module, if module is not a wasm
// binary whose data section it can repack exactly.
func Pack(module []byte) ([]byte, error) {
	found := false
	out, err := rewrite(module, func(id byte, body []byte) ([]byte, bool, error) {
		switch id {
		case sectionCode:
			b, err := foldCode(body)
			return b, true, err
		case sectionData:
			if found {
				return nil, false, errors.New("wasmpack: two data sections")
			}
			found = true
			segs, err := parseData(body)
			if err != nil {
				return nil, false, err
			}
			return writeData(merge(segs)), true, nil
		}
		return nil, false, nil
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errors.New("wasmpack: no data section")
	}
	return out, nil
}

// rewrite returns module with the sections f changes (changed true)
// replaced by the body f returns; every other section is kept byte for
// byte, its header included.
func rewrite(module []byte, f func(id byte, body []byte) (newBody []byte, changed bool, err error)) ([]byte, error) {
	if len(module) < 8 || !bytes.Equal(module[:4], []byte("\x00asm")) {
		return nil, errors.New("wasmpack: not a wasm module")
	}
	out := make([]byte, 0, len(module)+len(module)/4)
	out = append(out, module[:8]...)
	r := Reader{B: module, I: 8}
	for r.I < len(module) {
		start := r.I
		id := r.Byte()
		size := r.ULEB()
		if r.Err != nil || size > uint64(len(module)-r.I) {
			return nil, errors.New("wasmpack: truncated section")
		}
		end := r.I + int(size)
		body, changed, err := f(id, module[r.I:end])
		if err != nil {
			return nil, err
		}
		if changed {
			out = append(out, id)
			out = appendUleb(out, uint64(len(body)))
			out = append(out, body...)
		} else {
			out = append(out, module[start:end]...)
		}
		r.I = end
	}
	return out, nil
}

func parseData(b []byte) ([]segment, error) {
	r := Reader{B: b}
	n := r.ULEB()
	if r.Err != nil || n > uint64(len(b)) {
		return nil, errors.New("wasmpack: bad data section")
	}
	segs := make([]segment, 0, n)
	for k := uint64(0); k < n; k++ {
		if flags := r.ULEB(); flags != 0 {
			return nil, fmt.Errorf("wasmpack: data segment %d is not active in memory 0 (flags %d)", k, flags)
		}
		if op := r.Byte(); op != 0x41 { // i32.const
			return nil, fmt.Errorf("wasmpack: data segment %d: offset is not an i32.const", k)
		}
		off := r.SLEB()
		if op := r.Byte(); op != 0x0b { // end
			return nil, fmt.Errorf("wasmpack: data segment %d: offset expression is not a single constant", k)
		}
		size := r.ULEB()
		if r.Err != nil || size > uint64(len(b)-r.I) {
			return nil, fmt.Errorf("wasmpack: data segment %d is truncated", k)
		}
		if off < 0 || off+int64(size) > 1<<32 {
			return nil, fmt.Errorf("wasmpack: data segment %d lies outside 32-bit memory", k)
		}
		segs = append(segs, segment{offset: uint32(off), data: b[r.I : r.I+int(size)]})
		r.I += int(size)
	}
	if r.Err != nil || r.I != len(b) {
		return nil, errors.New("wasmpack: bad data section")
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].offset < segs[j].offset })
	for i := 1; i < len(segs); i++ {
		if uint64(segs[i-1].offset)+uint64(len(segs[i-1].data)) > uint64(segs[i].offset) {
			return nil, fmt.Errorf("wasmpack: data segments overlap at offset %d", segs[i].offset)
		}
	}
	return segs, nil
}

// merge joins sorted, non-overlapping segments separated by at most MaxGap
// bytes, writing the zeros between them.
func merge(segs []segment) []segment {
	var out []segment
	for _, s := range segs {
		if len(s.data) == 0 {
			continue
		}
		if n := len(out); n > 0 {
			last := &out[n-1]
			end := uint64(last.offset) + uint64(len(last.data))
			if gap := uint64(s.offset) - end; gap <= MaxGap {
				buf := make([]byte, 0, len(last.data)+int(gap)+len(s.data))
				buf = append(buf, last.data...)
				buf = append(buf, make([]byte, gap)...)
				last.data = append(buf, s.data...)
				continue
			}
		}
		out = append(out, segment{offset: s.offset, data: s.data})
	}
	return out
}

func writeData(segs []segment) []byte {
	var b []byte
	b = appendUleb(b, uint64(len(segs)))
	for _, s := range segs {
		b = append(b, 0, 0x41) // active, memory 0; i32.const
		b = appendSleb(b, int64(int32(s.offset)))
		b = append(b, 0x0b)
		b = appendUleb(b, uint64(len(s.data)))
		b = append(b, s.data...)
	}
	return b
}

// Memory returns the bytes the data section of module initializes, from
// address 0 to the end of the highest segment: two modules with equal
// Memory start with equal memory.
func Memory(module []byte) ([]byte, error) {
	r := Reader{B: module, I: 8}
	for r.I < len(module) {
		id := r.Byte()
		size := r.ULEB()
		if r.Err != nil || size > uint64(len(module)-r.I) {
			return nil, errors.New("wasmpack: truncated section")
		}
		end := r.I + int(size)
		if id == sectionData {
			segs, err := parseData(module[r.I:end])
			if err != nil {
				return nil, err
			}
			var mem []byte
			for _, s := range segs {
				if e := int(s.offset) + len(s.data); e > len(mem) {
					mem = append(mem, make([]byte, e-len(mem))...)
				}
				copy(mem[s.offset:], s.data)
			}
			return mem, nil
		}
		r.I = end
	}
	return nil, errors.New("wasmpack: no data section")
}

// Reader decodes the primitives of the wasm binary format from B, starting
// at I. The first failure is kept in Err and later reads return zero, so a
// caller checks Err once after a run of reads. (The bench's size report
// reads modules with it too.)
type Reader struct {
	B   []byte
	I   int
	Err error
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.I >= len(r.B) {
		r.Err = io.ErrUnexpectedEOF
		return 0
	}
	c := r.B[r.I]
	r.I++
	return c
}

// ULEB reads an unsigned LEB128 number.
func (r *Reader) ULEB() uint64 {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c := r.Byte()
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	r.Err = errors.New("wasmpack: bad LEB128")
	return 0
}

// SLEB reads a signed LEB128 number.
func (r *Reader) SLEB() int64 {
	var v int64
	for shift := uint(0); shift < 64; {
		c := r.Byte()
		v |= int64(c&0x7f) << shift
		shift += 7
		if c < 0x80 {
			if c&0x40 != 0 && shift < 64 {
				v -= 1 << shift
			}
			return v
		}
	}
	r.Err = errors.New("wasmpack: bad LEB128")
	return 0
}

// Name reads a length-prefixed name.
func (r *Reader) Name() string {
	n := r.ULEB()
	if r.Err != nil || n > uint64(len(r.B)-r.I) {
		r.Err = io.ErrUnexpectedEOF
		return ""
	}
	s := string(r.B[r.I : r.I+int(n)])
	r.I += int(n)
	return s
}

// Limits skips a limits field (a flag byte, a minimum and maybe a maximum).
func (r *Reader) Limits() {
	if r.Byte()&1 == 1 {
		r.ULEB()
	}
	r.ULEB()
}

func appendUleb(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
