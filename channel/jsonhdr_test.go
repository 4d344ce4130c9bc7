package channel

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
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
