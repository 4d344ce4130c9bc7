package wasmpack

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Go's function table (pclntab) maps every instruction of the program to
// its source file and line, for panics and runtime.Caller. Those two tables
// are the largest part of pclntab and compress badly; a browser never shows
// them except in a panic's stack trace. stripLines drops them: every
// function's pcfile and pcln offsets become 0, which the runtime reads as
// "no table" (funcline returns "?", 0), and the bytes of the tables no
// other table shares are zeroed. What the runtime needs to run is kept as
// it was: the stack-size table (pcsp), every pcdata table (stack maps,
// unsafe points, inlining, bounds-check panics), the funcdata and the
// names of functions, so a stack trace still names every frame.

// StripLines returns module with the file and line tables of its pclntab
// dropped (see stripLines) and its data section written as Pack writes it.
// The initial memory is the old one with those tables' bytes and offsets
// zeroed, nothing else: StrippedMemory computes it from the old module, and
// the command checks the result against it.
func StripLines(module []byte) ([]byte, LineStats, error) {
	mem, err := Memory(module)
	if err != nil {
		return nil, LineStats{}, err
	}
	st, err := stripLines(mem)
	if err != nil {
		return nil, st, err
	}
	out, err := replaceData(module, writeData(segmentsOf(mem)))
	return out, st, err
}

// StrippedMemory is the initial memory StripLines gives module.
func StrippedMemory(module []byte) ([]byte, error) {
	mem, err := Memory(module)
	if err != nil {
		return nil, err
	}
	_, err = stripLines(mem)
	return mem, err
}

// replaceData returns module with the body of its data section replaced.
func replaceData(module, body []byte) ([]byte, error) {
	return rewrite(module, func(id byte, _ []byte) ([]byte, bool, error) {
		return body, id == sectionData, nil
	})
}

// segmentsOf cuts memory into the segments Pack would write for it: runs
// of bytes split where more than MaxGap zero bytes lie between them.
func segmentsOf(mem []byte) []segment {
	var segs []segment
	for i := 0; i < len(mem); {
		for i < len(mem) && mem[i] == 0 {
			i++
		}
		if i == len(mem) {
			break
		}
		start, zeros := i, 0
		for ; i < len(mem) && zeros <= MaxGap; i++ {
			if mem[i] == 0 {
				zeros++
			} else {
				zeros = 0
			}
		}
		segs = append(segs, segment{offset: uint32(start), data: mem[start : i-zeros]})
	}
	return segs
}

// pclnMagic is the first eight bytes of a Go 1.20+ pcHeader on wasm: the
// magic 0xFFFFFFF1, two zero pads, minLC 1 and ptrSize 8.
var pclnMagic = []byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8}

// Offsets in runtime._func (runtime2.go), which is followed by npcdata
// uint32 pcdata offsets.
const (
	funcPCSP      = 16
	funcPCFile    = 20
	funcPCLn      = 24
	funcNPCData   = 28
	funcNFuncData = 43
	funcPCData    = 44
)

// LineStats reports what stripLines did.
type LineStats struct {
	Funcs       int // functions in the table
	TableBytes  int // bytes of the pcfile and pcln tables dropped
	ZeroedBytes int // of which were zeroed (the rest are shared with kept tables)
}

// stripLines drops the file and line tables of the pclntab found in mem
// (the module's initial memory from address 0), in place. It returns an
// error, having changed nothing, when it does not find exactly one pclntab
// whose every table it can decode.
func stripLines(mem []byte) (LineStats, error) {
	p, err := findPclntab(mem)
	if err != nil {
		return LineStats{}, err
	}
	funcs, keep, drop, err := p.tables()
	if err != nil {
		return LineStats{}, err
	}
	// Every check passed: now change the memory.
	st := p.zero(keep, drop)
	for _, f := range funcs {
		binary.LittleEndian.PutUint32(mem[f+funcPCFile:], 0)
		binary.LittleEndian.PutUint32(mem[f+funcPCLn:], 0)
	}
	st.Funcs = len(funcs)
	return st, nil
}

// pclntab is the one pclntab of a module's memory: where its pc tables
// (pctab) and its function table (functab) start.
type pclntab struct {
	mem                   []byte
	nfunc, pctab, functab int
}

// span is a pc table: at its offset in memory, n bytes.
type span struct{ at, n int }

func findPclntab(mem []byte) (*pclntab, error) {
	hdr := bytes.Index(mem, pclnMagic)
	if hdr < 0 {
		return nil, errors.New("wasmpack: no pclntab found")
	}
	if bytes.Index(mem[hdr+1:], pclnMagic) >= 0 {
		return nil, errors.New("wasmpack: two pclntab candidates")
	}
	u64 := func(at int) (int, bool) {
		if at < 0 || at+8 > len(mem) {
			return 0, false
		}
		v := binary.LittleEndian.Uint64(mem[at:])
		if v > uint64(len(mem)) {
			return 0, false
		}
		return int(v), true
	}
	nfunc, ok1 := u64(hdr + 8)
	pctabOff, ok2 := u64(hdr + 56)
	pclnOff, ok3 := u64(hdr + 64)
	if !ok1 || !ok2 || !ok3 || nfunc == 0 {
		return nil, errors.New("wasmpack: pclntab header out of range")
	}
	p := &pclntab{mem: mem, nfunc: nfunc, pctab: hdr + pctabOff, functab: hdr + pclnOff}
	if p.functab+8*(nfunc+1) > len(mem) || p.pctab >= len(mem) {
		return nil, errors.New("wasmpack: pclntab out of range")
	}
	return p, nil
}

func (p *pclntab) u32(at int) uint32 { return binary.LittleEndian.Uint32(p.mem[at:]) }

// tables decodes every function's entry: the _func offsets (funcs), the
// tables to keep (pcsp, pcdata) and those to drop (pcfile, pcln).
func (p *pclntab) tables() (funcs []int, keep, drop []span, err error) {
	mem := p.mem
	funcs = make([]int, 0, p.nfunc)
	add := func(to *[]span, off uint32) error {
		if off == 0 {
			return nil
		}
		n, err := p.tableLen(off)
		if err != nil {
			return err
		}
		*to = append(*to, span{p.pctab + int(off), n})
		return nil
	}
	for k := 0; k < p.nfunc; k++ {
		f := p.functab + int(p.u32(p.functab+8*k+4))
		if f+funcPCData > len(mem) {
			return nil, nil, nil, errors.New("wasmpack: pclntab function out of range")
		}
		npc := int(p.u32(f + funcNPCData))
		if npc > 16 || f+funcPCData+4*npc > len(mem) || mem[f+funcNFuncData] > 16 {
			return nil, nil, nil, fmt.Errorf("wasmpack: pclntab function %d does not look like a _func", k)
		}
		funcs = append(funcs, f)
		if err := add(&keep, p.u32(f+funcPCSP)); err != nil {
			return nil, nil, nil, err
		}
		for j := 0; j < npc; j++ {
			if err := add(&keep, p.u32(f+funcPCData+4*j)); err != nil {
				return nil, nil, nil, err
			}
		}
		if err := add(&drop, p.u32(f+funcPCFile)); err != nil {
			return nil, nil, nil, err
		}
		if err := add(&drop, p.u32(f+funcPCLn)); err != nil {
			return nil, nil, nil, err
		}
	}
	return funcs, keep, drop, nil
}

// tableLen is the length of the pc table at off, decoded as runtime.step
// does: pairs of a zigzag value delta and a pc delta (varints), ended by a
// zero value delta after the first pair.
func (p *pclntab) tableLen(off uint32) (int, error) {
	mem := p.mem
	start := p.pctab + int(off)
	i, first := start, true
	for {
		if i >= len(mem) {
			return 0, fmt.Errorf("wasmpack: pc table at %d runs off memory", off)
		}
		if mem[i] == 0 && !first {
			return i + 1 - start, nil
		}
		for n := 0; n < 2; n++ { // value delta, then pc delta
			for {
				if i >= len(mem) || i-start > 1<<20 {
					return 0, fmt.Errorf("wasmpack: bad pc table at %d", off)
				}
				c := mem[i]
				i++
				if c&0x80 == 0 {
					break
				}
			}
		}
		first = false
	}
}

// zero zeroes the bytes of the dropped tables that no kept table shares.
func (p *pclntab) zero(keep, drop []span) (st LineStats) {
	mem := p.mem
	// mark: 1 for a byte of a kept table, 2 for a byte zeroed.
	mark := make([]byte, len(mem))
	for _, s := range keep {
		for i := s.at; i < s.at+s.n; i++ {
			mark[i] = 1
		}
	}
	counted := map[int]bool{} // dropped tables by offset: functions share them
	for _, s := range drop {
		if !counted[s.at] {
			counted[s.at] = true
			st.TableBytes += s.n
		}
		for i := s.at; i < s.at+s.n; i++ {
			if mark[i] == 0 {
				mark[i], mem[i] = 2, 0
				st.ZeroedBytes++
			}
		}
	}
	return st
}
