package upload

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tabfence/tabfence/wire"
)

// Limits on what a creation may declare. The metadata header is bounded
// well below net/http's header limit because it is parsed on every creation
// before any authorisation of the bytes: a few fields fit in far less.
const (
	MaxMetadataLen = 4096
	MaxFilenameLen = 255
)

// meta is the creation metadata the server keeps: only these fields, as
// validated here, ever reach the store or a HEAD answer.
type meta struct {
	Key      string
	SHA256   string // lowercase hex
	Filename string
}

// parseMeta reads Upload-Metadata strictly. tusd's own parser skips a pair
// whose value is not base64, which would turn a corrupted key into a missing
// one; here any malformed pair refuses the creation with 400, so a client
// bug is seen at once instead of as a duplicate upload.
func parseMeta(h http.Header) (meta, error) {
	vals := h.Values("Upload-Metadata")
	if len(vals) > 1 {
		return meta{}, errBadMeta("Upload-Metadata sent more than once")
	}
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return meta{}, errBadMeta("Upload-Metadata missing: it must carry key and sha256")
	}
	if len(vals[0]) > MaxMetadataLen {
		return meta{}, errBadMeta("Upload-Metadata longer than 4096 bytes")
	}
	pairs := map[string]string{}
	for _, el := range strings.Split(vals[0], ",") {
		k, v, err := parsePair(strings.TrimSpace(el))
		if err != nil {
			return meta{}, err
		}
		if _, dup := pairs[k]; dup {
			return meta{}, errBadMeta("metadata key " + k + " sent twice")
		}
		pairs[k] = v
	}
	m := meta{Key: pairs["key"], SHA256: strings.ToLower(pairs["sha256"]), Filename: pairs["filename"]}
	if !wire.ValidKey(m.Key) {
		return meta{}, errBadMeta("metadata key missing or malformed: 1-255 printable ASCII characters other than '\"' and '\\'")
	}
	if b, err := hex.DecodeString(m.SHA256); err != nil || len(b) != 32 {
		return meta{}, errBadMeta("metadata sha256 missing or malformed: 64 hex digits")
	}
	if !validFilename(m.Filename) {
		return meta{}, errBadMeta("metadata filename malformed: at most 255 bytes of UTF-8 without control characters")
	}
	return m, nil
}

// parsePair parses one "name base64value" element of Upload-Metadata.
func parsePair(el string) (string, string, error) {
	name, enc, hasValue := strings.Cut(el, " ")
	if name == "" || strings.ContainsAny(enc, " ") {
		return "", "", errBadMeta("metadata element malformed (want \"name base64value\")")
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return "", "", errBadMeta("metadata name not printable ASCII")
		}
	}
	if !hasValue {
		return name, "", nil
	}
	v, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", "", errBadMeta("metadata value of " + name + " is not base64")
	}
	return name, string(v), nil
}

func validFilename(f string) bool {
	if len(f) > MaxFilenameLen || !utf8.ValidString(f) {
		return false
	}
	for _, r := range f {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
