package wasmpack

import (
	"errors"
	"fmt"
)

// Go's wasm backend computes most memory addresses in 64 bits and then
// truncates them: a load from 312(SP) is written
//
//	local.get $sp; i64.extend_i32_u; i64.const 312; i64.add; i32.wrap_i64; i64.load offset=0
//
// (six instructions, 9 bytes) where wasm can say
//
//	local.get $sp; i64.load offset=312
//
// (4 bytes), in tens of thousands of loads and stores. foldCode
// moves the constant into the instruction's offset immediate and, when the
// base is an extended 32-bit local, drops the extend/wrap pair.
//
// Why it is exact: the two forms read the same address unless base+C
// passes 2^32 (for any 64-bit base b, wrap(b+C) against wrap(b)+C), where
// the 64-bit form wraps around to low memory and the offset form traps. A Go program's memory is below 4 GiB and a valid
// access (an object plus a field or frame offset) ends inside it, so no
// valid access wraps; only an out-of-bounds access already gone wrong
// would now trap instead of reading unrelated memory. Nothing else in the
// module depends on code bytes: Go's tables address code by function and
// resume point, not by byte offset, and the rewrite adds or removes no
// block, branch or call.
//
// foldCode only rewrites what it fully understands: the constant must be
// non-negative with the sum below 2^31, and for a store the instructions
// between the address and the store must be plain value computations
// (no calls, no control flow). Anything else is left byte for byte.

const sectionCode = 10

// Opcodes foldCode matches.
const (
	opLocalGet  = 0x20
	opI64Const  = 0x42
	opI64Add    = 0x7c
	opWrapI64   = 0xa7
	opExtendU32 = 0xad
)

// maxFold bounds the folded offset; Go's constants are frame and field
// offsets, far below it.
const maxFold = 1<<31 - 1

// instr is one decoded instruction of a function body.
type instr struct {
	start, end int   // byte range in the body
	op         int   // opcode; 0xfc00|sub for the 0xfc prefix
	imm        int64 // i64.const value
	align      uint64
	offset     uint64 // memarg of loads and stores
	memarg     int    // byte index of the memarg (align, offset) in the body, or -1
}

func isLoad(op int) bool  { return op >= 0x28 && op <= 0x35 }
func isStore(op int) bool { return op >= 0x36 && op <= 0x3e }

// foldCode rewrites a code section; see above.
func foldCode(sec []byte) ([]byte, error) {
	r := Reader{B: sec}
	n := r.ULEB()
	if r.Err != nil {
		return nil, errors.New("wasmpack: bad code section")
	}
	out := appendUleb(make([]byte, 0, len(sec)), n)
	for k := uint64(0); k < n; k++ {
		size := r.ULEB()
		if r.Err != nil || size > uint64(len(sec)-r.I) {
			return nil, fmt.Errorf("wasmpack: function body %d is truncated", k)
		}
		body, err := foldBody(sec[r.I : r.I+int(size)])
		if err != nil {
			return nil, fmt.Errorf("wasmpack: function body %d: %w", k, err)
		}
		out = appendUleb(out, uint64(len(body)))
		out = append(out, body...)
		r.I += int(size)
	}
	if r.I != len(sec) {
		return nil, errors.New("wasmpack: bad code section")
	}
	return out, nil
}

func foldBody(body []byte) ([]byte, error) {
	r := Reader{B: body}
	groups := r.ULEB()
	for g := uint64(0); g < groups && r.Err == nil; g++ {
		r.ULEB()
		r.Byte()
	}
	if r.Err != nil {
		return nil, errors.New("bad locals")
	}
	codeStart := r.I
	ins, err := decode(&r)
	if err != nil {
		return nil, err
	}
	// repl[i] replaces instruction i (an empty replacement drops it).
	repl := make(map[int][]byte)
	for i := 0; i+3 < len(ins); i++ {
		if ins[i].op != opI64Const || ins[i+1].op != opI64Add || ins[i+2].op != opWrapI64 {
			continue
		}
		// local.get x; i64.extend_i32_u ... i32.wrap_i64: the base is x.
		ext := i >= 2 && ins[i-2].op == opLocalGet && ins[i-1].op == opExtendU32
		c := ins[i].imm
		user := consumer(ins, i+3)
		if user < 0 || c < 0 || uint64(c)+ins[user].offset > maxFold || repl[user] != nil {
			continue
		}
		in := ins[user]
		op := append([]byte(nil), body[in.start:in.memarg]...)
		op = appendUleb(op, in.align)
		repl[user] = appendUleb(op, in.offset+uint64(c))
		repl[i], repl[i+1] = []byte{}, []byte{}
		if ext {
			repl[i-1], repl[i+2] = []byte{}, []byte{}
		}
	}
	if len(repl) == 0 {
		return body, nil
	}
	out := append(make([]byte, 0, len(body)), body[:codeStart]...)
	for i, in := range ins {
		if b, ok := repl[i]; ok {
			out = append(out, b...)
		} else {
			out = append(out, body[in.start:in.end]...)
		}
	}
	return out, nil
}

// consumer returns the index of the load or store that takes the address
// left on the stack just before ins[from] as its address operand, or -1
// when that is not certain.
func consumer(ins []instr, from int) int {
	depth := 1 // the address
	for j := from; j < len(ins); j++ {
		op := ins[j].op
		pop, push, ok := effect(op)
		if !ok {
			return -1
		}
		if pop >= depth {
			// ins[j] takes the address: it must be its first operand.
			if pop == depth && (isLoad(op) || isStore(op)) {
				return j
			}
			return -1
		}
		depth += push - pop
	}
	return -1
}

// effect is how many values a plain (non-control) instruction pops and
// pushes; ok is false for anything else, which ends a search.
func effect(op int) (pop, push int, ok bool) {
	switch {
	case op == 0x1a: // drop
		return 1, 0, true
	case op == 0x1b: // select
		return 3, 1, true
	case op == 0x20, op == 0x23: // local.get, global.get
		return 0, 1, true
	case op == 0x21, op == 0x24: // local.set, global.set
		return 1, 0, true
	case op == 0x22: // local.tee
		return 1, 1, true
	case isLoad(op):
		return 1, 1, true
	case isStore(op):
		return 2, 0, true
	case op >= 0x41 && op <= 0x44: // consts
		return 0, 1, true
	case op == 0x45, op == 0x50: // eqz
		return 1, 1, true
	case op >= 0x46 && op <= 0x4f, op >= 0x51 && op <= 0x66: // comparisons
		return 2, 1, true
	case op >= 0x67 && op <= 0x69, op >= 0x79 && op <= 0x7b: // clz ctz popcnt
		return 1, 1, true
	case op >= 0x6a && op <= 0x78, op >= 0x7c && op <= 0x8a: // integer binary
		return 2, 1, true
	case op >= 0x8b && op <= 0x91, op >= 0x99 && op <= 0x9f: // float unary
		return 1, 1, true
	case op >= 0x92 && op <= 0x98, op >= 0xa0 && op <= 0xa6: // float binary
		return 2, 1, true
	case op >= 0xa7 && op <= 0xc4: // conversions, sign extension
		return 1, 1, true
	case op >= 0xfc00 && op <= 0xfc07: // saturating truncation
		return 1, 1, true
	}
	return 0, 0, false
}

// decode reads the instructions from r.I to the end of r.B. It knows the
// instructions of wasm 1.0 plus the sign-extension, saturating-conversion
// and bulk-memory ones; anything else is an error, so a module using an
// instruction this code does not know is refused rather than mangled.
func decode(r *Reader) ([]instr, error) {
	var ins []instr
	for r.I < len(r.B) {
		in := instr{start: r.I, memarg: -1}
		op := int(r.Byte())
		switch {
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
			op >= 0x45 && op <= 0xc4, op == 0xd1:
		case op >= 0x02 && op <= 0x04: // block, loop, if: block type
			r.SLEB()
		case op == 0x0c, op == 0x0d, op >= 0x20 && op <= 0x26, op == 0xd0, op == 0xd2:
			r.ULEB()
		case op == 0x0e: // br_table
			n := r.ULEB()
			if n > uint64(len(r.B)) {
				return nil, errors.New("bad br_table")
			}
			for k := uint64(0); k <= n && r.Err == nil; k++ {
				r.ULEB()
			}
		case op == 0x10:
			r.ULEB()
		case op == 0x11: // call_indirect: type, table
			r.ULEB()
			r.ULEB()
		case op == 0x1c: // select with types
			n := r.ULEB()
			for k := uint64(0); k < n && r.Err == nil; k++ {
				r.Byte()
			}
		case op >= 0x28 && op <= 0x3e:
			in.memarg = r.I
			in.align = r.ULEB()
			in.offset = r.ULEB()
		case op == 0x3f, op == 0x40:
			r.Byte()
		case op == 0x41, op == 0x42:
			in.imm = r.SLEB()
		case op == 0x43:
			r.I += 4
		case op == 0x44:
			r.I += 8
		case op == 0xfc:
			sub := r.ULEB()
			op = 0xfc00 | int(sub&0xff)
			switch {
			case sub <= 7:
			case sub == 8: // memory.init
				r.ULEB()
				r.Byte()
			case sub == 9: // data.drop
				r.ULEB()
			case sub == 10: // memory.copy
				r.Byte()
				r.Byte()
			case sub == 11: // memory.fill
				r.Byte()
			default:
				return nil, fmt.Errorf("unknown instruction 0xfc %d", sub)
			}
		default:
			return nil, fmt.Errorf("unknown instruction 0x%02x", op)
		}
		if r.Err != nil || r.I > len(r.B) {
			return nil, errors.New("truncated instruction")
		}
		in.op = op
		in.end = r.I
		ins = append(ins, in)
	}
	return ins, nil
}
