package channel

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `q"uote`, `back\slash`, "nl\ncr\rtab\t", "\x00\x01\x1f\x7f", "ünïcödé ✓ 𝄞",
		"\u2028\u2029", `</script>`, strings.Repeat(`"\`, 50),
	} {
		b := AppendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, b, err)
		}
		if got != s {
			t.Errorf("%q: round trip gave %q (%s)", s, got, b)
		}
	}
	// Bytes that are not UTF-8 stay a valid JSON string whose structure
	// they cannot break (the browser decodes them to U+FFFD).
	for _, s := range []string{"\xff", "\xe2\"", "a\xc3", "\xe2\x80\\"} {
		b := AppendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, b, err)
		}
		if strings.Trim(got, "\ufffd") != strings.Trim(strings.ToValidUTF8(s, "\ufffd"), "\ufffd") {
			t.Errorf("%q: gave %q", s, got)
		}
	}
}

func TestHeaderJSON(t *testing.T) {
	var p Payload
	e := NewSequencer("res \"1\"", "owner\n", 42).Next("delta", p)
	e.Seq = MaxToken
	for _, withPayload := range []bool{false, true} {
		b := appendHeaderJSON(nil, e, withPayload)
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(string(b)))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		want := map[string]any{"protocol": Protocol, "version": json.Number("1"), "id": e.ID, "kind": "delta",
			"resource": e.Resource, "owner": e.Owner, "token": json.Number("42"),
			"seq": json.Number("9007199254740991"), "sentAt": json.Number(strconv.FormatInt(e.SentAt, 10))}
		if withPayload {
			want["payload"] = nil
		}
		if len(m) != len(want) {
			t.Fatalf("%s: fields %v, want %v", b, m, want)
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s: %s = %v, want %v", b, k, m[k], v)
			}
		}
		// The order of the fields is the envelope's (as the property writes made it).
		order := []string{"protocol", "version", "id", "kind", "resource", "owner", "token", "seq", "sentAt"}
		if withPayload {
			order = append(order, "payload")
		}
		at := 0
		for _, k := range order {
			i := strings.Index(string(b[at:]), `"`+k+`":`)
			if i < 0 {
				t.Fatalf("%s: %s out of order", b, k)
			}
			at += i
		}
	}
}

func TestDecodeHeaderJSON(t *testing.T) {
	l := DefaultLimits
	ok := func(h string) Envelope {
		t.Helper()
		e, why := decodeHeaderJSON(h, l)
		require.Equal(t, ReasonNone, why, h)
		require.Equal(t, Protocol, e.Protocol, h)
		require.Equal(t, Version, e.Version, h)
		return e
	}
	e := ok(`["tabfence",1,"id1","delta","res","own",3,17,1764454000123]`)
	require.Equal(t, Envelope{Protocol: Protocol, Version: Version, ID: "id1", Kind: "delta", Resource: "res", Owner: "own", Token: 3, Seq: 17, SentAt: 1764454000123}, e)
	// Escapes as JSON.stringify writes them; a lone surrogate is U+FFFD, as
	// a copy of the string into Go makes it.
	e = ok(`["tabfence",1,"q\"b\\s\/\b\f\n\r\t\u0001","\ud834\udd1e x","\ud800","\udc00\ud800z",0,9007199254740991,0]`)
	require.Equal(t, "q\"b\\s/\b\f\n\r\t\x01", e.ID)
	require.Equal(t, "𝄞 x", e.Kind)
	require.Equal(t, "\ufffd", e.Resource)
	require.Equal(t, "\ufffd\ufffdz", e.Owner)
	require.Equal(t, uint64(MaxToken), e.Seq)
	e = ok(`["tabfence",1,"ü✓","k","r","o",1000,1,1]`)
	require.Equal(t, "ü✓", e.ID)
	require.Equal(t, uint64(1000), e.Token)
	// After the protocol and the version, as JSON.stringify writes them.
	const pre = `["tabfence",1,`
	for _, h := range []string{
		``, `]`, `"a","k","r","o",1,1]`, `"a","k","r","o",1,1,1,1]`, `"a","k","r",5,1,1,1]`, `"a","k","r",null,1,1,1]`,
		`"a","k","r","o",null,1,1]`, `"a","k","r","o",-1,1,1]`, `"a","k","r","o",1.5,1,1]`,
		`"a","k","r","o",9007199254740992,1,1]`, `"a","k","r","o",1e21,1,1]`, `"a","k","r","o","1",1,1]`,
		`"a","k","r","o",1e3,1,1]`, `"a","k","r","o",1.0,1,1]`, `"a","k","r","o",99999999999999999999999,1,1]`,
		`"a","k","r","o",1,1,1]x`, `"a","k","r","o",1,1,1`, `"a\x","k","r","o",1,1,1]`, `"a\u12","k","r","o",1,1,1]`,
		"\"a\x01\",\"k\",\"r\",\"o\",1,1,1]", `"a,"k","r","o",1,1,1]`, `"a","k","r","o",1 ,1,1]`,
	} {
		_, why := decodeHeaderJSON(pre+h, l)
		assert.Equal(t, Malformed, why, pre+h)
	}
	// The protocol first (not the string "tabfence": foreign), then the
	// version, as decode judges them.
	for h, want := range map[string]Reason{
		``: Malformed, `[]`: ForeignProtocol, `[null,1,"a","k","r","o",1,1,1]`: ForeignProtocol,
		`["x",1,"a","k","r","o",1,1,1]`: ForeignProtocol, `["tabfence",2,null,null,null,null,null,null,null]`: WrongVersion,
		`["tabfence",null,"a","k","r","o",1,1,1]`: Malformed, `["tabfence","1","a","k","r","o",1,1,1]`: Malformed,
		`["tabfence",1.5,"a","k","r","o",1,1,1]`: Malformed, `[5,"tabfence","a","k","r","o",1,1,1]`: ForeignProtocol,
	} {
		_, why := decodeHeaderJSON(h, l)
		assert.Equal(t, want, why, h)
	}
	// Bounds in UTF-16 units, as in JavaScript.
	l.MaxKind = 3
	_, why := decodeHeaderJSON(pre+`"a","𝄞x","r","o",1,1,1]`, l)
	assert.Equal(t, ReasonNone, why, "3 units")
	_, why = decodeHeaderJSON(pre+`"a","𝄞𝄞","r","o",1,1,1]`, l)
	assert.Equal(t, Oversized, why, "4 units")
	// Whatever encoding/json writes for the strings (it escapes more than
	// JSON.stringify), they come back.
	for _, s := range []string{"<&>", "\u2028", strings.Repeat("\\\"", 20), "tab\tnl\n"} {
		b, _ := json.Marshal([]any{"tabfence", 1, s, "k", "r", "o", 1, 2, 3})
		assert.Equal(t, s, ok(string(b)).ID)
	}
}

func TestIDWords(t *testing.T) {
	for i := 0; i < 100; i++ {
		id := NewID()
		w, ok := idWords(id)
		if !ok {
			t.Fatalf("%q not read", id)
		}
		// What the hook post2 does: each word as 8 hex digits.
		got := ""
		for _, x := range w {
			got += fmt.Sprintf("%08x", x)
		}
		if got != id {
			t.Fatalf("%q read back as %q", id, got)
		}
	}
	if w, ok := idWords("0000000100000002000000030000000f"); !ok || w != [4]uint32{1, 2, 3, 15} {
		t.Fatalf("got %v %v", w, ok)
	}
	for _, id := range []string{"", "id1", "0123456789ABCDEF0123456789abcdef", "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0", "0123456789abcdef0123456789abcdeg", "é123456789abcdef0123456789abcde"} {
		if _, ok := idWords(id); ok {
			t.Errorf("%q read as an ID of 32 hex digits", id)
		}
	}
}
