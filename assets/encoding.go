package assets

import (
	"strconv"
	"strings"
)

// maxCodings bounds the members of Accept-Encoding looked at: browsers send
// three or four, and a hostile header of thousands costs nothing past this.
const maxCodings = 32

// preferred lists the content codings to try, best first, from the request's
// Accept-Encoding values (RFC 9110 §12.5.3), ending with "" (the file
// itself). A coding with q=0, or an unparsable q, is not acceptable; "*"
// stands for the codings not named. At equal q brotli goes first: it is the
// smaller of the two. x-gzip is gzip.
func preferred(values []string) []string {
	q := map[string]float64{}
	star, seen := -1.0, 0
	for _, v := range values {
		for _, member := range strings.Split(v, ",") {
			if seen++; seen > maxCodings {
				break
			}
			coding, w, ok := parseMember(member)
			if !ok {
				continue
			}
			if coding == "*" {
				star = w
				continue
			}
			q[coding] = w
		}
	}
	weight := func(c string) float64 {
		if w, ok := q[c]; ok {
			return w
		}
		if star >= 0 {
			return star
		}
		return 0
	}
	var out []string
	br, gz := weight("br"), weight("gzip")
	switch {
	case br > 0 && br >= gz:
		out = append(out, "br")
		if gz > 0 {
			out = append(out, "gzip")
		}
	case gz > 0:
		out = append(out, "gzip")
		if br > 0 {
			out = append(out, "br")
		}
	}
	return append(out, "")
}

// parseMember parses `coding[;q=value]`, the coding lower-cased.
func parseMember(m string) (string, float64, bool) {
	coding, params, _ := strings.Cut(m, ";")
	coding = strings.ToLower(strings.TrimSpace(coding))
	if coding == "" {
		return "", 0, false
	}
	if coding == "x-gzip" { // the same coding (RFC 9110 §8.4.1.3)
		coding = "gzip"
	}
	w := 1.0
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= 0 && f <= 1) || len(v) > 8 { // NaN, "q" alone
			return "", 0, false
		}
		w = f
	}
	return coding, w, true
}
