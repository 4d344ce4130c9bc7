package browser

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
)

// ParseCommitted reads the loader's batches; empty entries and ids that
// were not pending are counted, never delivered twice.
func TestParseCommitted(t *testing.T) {
	pending := map[string]bool{"a": true, "b": true}
	var got []string
	n := ParseCommitted("a;;b;zz;a", func(id string) bool {
		ok := pending[id]
		delete(pending, id)
		if ok {
			got = append(got, id)
		}
		return ok
	})
	require.Equal(t, []string{"a", "b"}, got)
	require.Equal(t, 3, n)
	require.Equal(t, 0, ParseCommitted("", func(string) bool { t.Fatal("an entry in nothing"); return false }))
}

// opFieldsBytes is what the loader's opFields writes for fields, given a
// dependency list of given elements.
func opFieldsBytes(given uint32, fields ...string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(fields)))
	b = binary.LittleEndian.AppendUint32(b, given)
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
	}
	for _, f := range fields {
		b = append(b, f...)
	}
	return b
}

// DecodeOpFields reads opFields' layout, and nothing else: short or
// inconsistent buffers are refused, never read past, and so is a list
// longer than the API takes (Go's own reading gives its TypeError).
func TestDecodeOpFields(t *testing.T) {
	op, ok := DecodeOpFields(opFieldsBytes(3, "put", "k", "note", "é", "payload", "d1", "d2"))
	require.True(t, ok)
	require.Equal(t, outbox.Op{OperationType: "put", OperationKey: "k", EntityType: "note", EntityID: "é", Payload: []byte("payload"), DependencyIDs: []string{"d1", "d2"}}, op)
	_, ok = DecodeOpFields(opFieldsBytes(MaxDependencyIDs, "put", "", "", "", "x"))
	require.True(t, ok, "a list of MaxDependencyIDs")
	good := opFieldsBytes(0xffffffff, "put", "", "", "", "x")
	for i, b := range [][]byte{
		nil, good[:7], good[:len(good)-1], opFieldsBytes(0xffffffff, "put", "", "", ""),
		opFieldsBytes(MaxDependencyIDs+1, "put", "", "", "", "x"),
		binary.LittleEndian.AppendUint64(nil, 1<<30),
	} {
		if _, ok := DecodeOpFields(b); ok {
			t.Fatalf("buffer %d read", i)
		}
	}
}
