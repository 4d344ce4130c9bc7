package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrNotJSON is an evaluate result JSON.stringify would reject too: a
// BigInt, a cyclic object, or an object deeper than the browser serialized.
var ErrNotJSON = errors.New("harness: the script's value has no JSON form")

// remoteValue is a WebDriver BiDi script.RemoteValue: the typed tree the
// browser serializes a script's result into. Value stays raw until its
// type says how to read it.
type remoteValue struct {
	Type       string          `json:"type"`
	Value      json.RawMessage `json:"value"`
	InternalID string          `json:"internalId"`
}

// remoteJSON converts a remote value into the JSON JSON.stringify gives
// for the same value in the page, so Eval decodes a Firefox result exactly
// as it decodes Chromium's returnByValue: NaN and ±Infinity become null,
// -0 becomes 0, undefined becomes null (omitted in an object, as a
// function or symbol is), a Date becomes its ISO string, and a Map, Set,
// RegExp, Error, Promise or DOM node becomes {} (none has own enumerable
// properties; the objects inside a Map or Set are still recorded, as a
// later reference may name one). Not seen: toJSON methods (BiDi does not call them) and a
// typed array's elements (BiDi sends none; JSON.stringify keys them by
// index), so both come out as their plain-object form.
func remoteJSON(raw json.RawMessage) ([]byte, error) {
	var rv remoteValue
	if err := json.Unmarshal(raw, &rv); err != nil {
		return nil, fmt.Errorf("harness: bidi remote value: %w", err)
	}
	e := valueEncoder{seen: map[string]*remoteValue{}, open: map[string]bool{}}
	if absent(&rv) {
		return []byte("null"), nil
	}
	if err := e.encode(&rv); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

// valueEncoder writes one remote value tree as JSON. BiDi sends an object
// that occurs twice in full the first time (with an internalId) and as a
// bare reference after: seen resolves references, open (the objects being
// written) tells a cycle, which JSON.stringify rejects, from a repeat.
type valueEncoder struct {
	buf  bytes.Buffer
	seen map[string]*remoteValue
	open map[string]bool
}

// absent reports a value JSON.stringify leaves out of an object (and
// writes as null in an array).
func absent(rv *remoteValue) bool {
	switch rv.Type {
	case "undefined", "function", "symbol":
		return true
	}
	return false
}

func (e *valueEncoder) encode(rv *remoteValue) error {
	if rv.InternalID != "" {
		if rv.Value == nil {
			if e.open[rv.InternalID] {
				return fmt.Errorf("%w: cyclic object value", ErrNotJSON)
			}
			full, ok := e.seen[rv.InternalID]
			if !ok {
				return fmt.Errorf("%w: reference to an unseen object", ErrNotJSON)
			}
			rv = full
		} else {
			e.seen[rv.InternalID] = rv
		}
		e.open[rv.InternalID] = true
		defer delete(e.open, rv.InternalID)
	}
	switch rv.Type {
	case "undefined", "null", "function", "symbol":
		e.buf.WriteString("null")
	case "boolean":
		e.buf.Write(rv.Value)
	case "string", "date":
		e.buf.Write(rv.Value) // already a JSON string
	case "number":
		return e.number(rv.Value)
	case "bigint":
		return errBigInt
	case "array":
		return e.array(rv)
	case "object":
		return e.object(rv)
	case "nodelist", "htmlcollection":
		return e.indexed(rv)
	case "map", "set":
		// JSON.stringify writes {} for both, but an object first sent in
		// full inside one is sent as a bare reference after it.
		e.record(rv)
		e.buf.WriteString("{}")
	default: // regexp, error, promise, node, window, weak*, ...
		e.buf.WriteString("{}")
	}
	return nil
}

// record notes every object sent in full within rv's contents (children
// of arrays, sets, node lists, objects and maps, keys included) in seen,
// without writing anything: the contents JSON.stringify leaves out still
// define the objects later references name.
func (e *valueEncoder) record(rv *remoteValue) {
	if rv.Value == nil {
		return
	}
	if rv.InternalID != "" {
		if _, ok := e.seen[rv.InternalID]; !ok {
			e.seen[rv.InternalID] = rv
		}
	}
	switch rv.Type {
	case "array", "set", "nodelist", "htmlcollection":
		var list []remoteValue
		if json.Unmarshal(rv.Value, &list) == nil {
			for i := range list {
				e.record(&list[i])
			}
		}
	case "object", "map":
		var pairs [][2]json.RawMessage
		if json.Unmarshal(rv.Value, &pairs) != nil {
			return
		}
		for _, p := range pairs {
			for _, raw := range p {
				var v remoteValue
				if json.Unmarshal(raw, &v) == nil { // a string key is no remote value
					e.record(&v)
				}
			}
		}
	}
}

// number writes a finite number as the browser printed it, and the
// special values JSON cannot carry as JSON.stringify does.
func (e *valueEncoder) number(v json.RawMessage) error {
	var s string
	if json.Unmarshal(v, &s) != nil {
		e.buf.Write(v) // a plain JSON number
		return nil
	}
	if j, ok := specialNumberJSON(s); ok {
		e.buf.WriteString(j)
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return fmt.Errorf("harness: bidi number %q", s)
	}
	e.buf.WriteString(s)
	return nil
}

// specialNumberJSON is what JSON.stringify writes for the numbers both
// protocols send as text because JSON cannot carry them: NaN and
// ±Infinity become null, -0 becomes 0.
func specialNumberJSON(s string) (string, bool) {
	switch s {
	case "NaN", "Infinity", "-Infinity":
		return "null", true
	case "-0":
		return "0", true
	}
	return "", false
}

// errBigInt is JSON.stringify's refusal of a BigInt, in both engines.
var errBigInt = fmt.Errorf("%w: BigInt value can't be serialized in JSON", ErrNotJSON)

// items decodes the value list of an array, set or node list; a missing
// list means the browser stopped serializing at its depth limit.
func items(rv *remoteValue) ([]remoteValue, error) {
	if rv.Value == nil {
		return nil, fmt.Errorf("%w: %s deeper than the browser serialized", ErrNotJSON, rv.Type)
	}
	var list []remoteValue
	if err := json.Unmarshal(rv.Value, &list); err != nil {
		return nil, fmt.Errorf("harness: bidi %s value: %w", rv.Type, err)
	}
	return list, nil
}

func (e *valueEncoder) array(rv *remoteValue) error {
	list, err := items(rv)
	if err != nil {
		return err
	}
	e.buf.WriteByte('[')
	for i := range list {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		if absent(&list[i]) {
			e.buf.WriteString("null")
			continue
		}
		if err := e.encode(&list[i]); err != nil {
			return err
		}
	}
	e.buf.WriteByte(']')
	return nil
}

// indexed writes a NodeList or HTMLCollection as JSON.stringify does: an
// object keyed by index.
func (e *valueEncoder) indexed(rv *remoteValue) error {
	list, err := items(rv)
	if err != nil {
		return err
	}
	e.buf.WriteByte('{')
	for i := range list {
		if i > 0 {
			e.buf.WriteByte(',')
		}
		e.buf.WriteString(`"` + strconv.Itoa(i) + `":`)
		if err := e.encode(&list[i]); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

// object writes the [key, value] pairs of an object in the page's own
// property order, leaving out the values JSON.stringify leaves out.
func (e *valueEncoder) object(rv *remoteValue) error {
	if rv.Value == nil {
		return fmt.Errorf("%w: object deeper than the browser serialized", ErrNotJSON)
	}
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(rv.Value, &pairs); err != nil {
		return fmt.Errorf("harness: bidi object value: %w", err)
	}
	e.buf.WriteByte('{')
	first := true
	for _, p := range pairs {
		var v remoteValue
		if err := json.Unmarshal(p[1], &v); err != nil {
			return fmt.Errorf("harness: bidi object entry: %w", err)
		}
		if absent(&v) {
			continue
		}
		key, err := objectKey(p[0])
		if err != nil {
			return err
		}
		if !first {
			e.buf.WriteByte(',')
		}
		first = false
		e.buf.Write(key)
		e.buf.WriteByte(':')
		if err := e.encode(&v); err != nil {
			return err
		}
	}
	e.buf.WriteByte('}')
	return nil
}

// objectKey returns an object's key as a JSON string: BiDi sends a string
// key as a plain string, and may send a key as a remote value.
func objectKey(raw json.RawMessage) ([]byte, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return raw, nil
	}
	var rv remoteValue
	if err := json.Unmarshal(raw, &rv); err != nil || (rv.Type != "string" && rv.Type != "number") {
		return nil, fmt.Errorf("harness: bidi object key %s", raw)
	}
	if rv.Type == "string" {
		return rv.Value, nil
	}
	return json.Marshal(string(bytes.Trim(rv.Value, `"`)))
}
