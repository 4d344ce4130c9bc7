package outbox

import "testing"

func TestHeaderGetIsCaseInsensitiveForASCIINames(t *testing.T) {
	h := Header{"Retry-After": "3", "x-fencing-highest": "9"}
	for name, want := range map[string]string{
		"Retry-After": "3", "retry-after": "3", "RETRY-AFTER": "3",
		"X-Fencing-Highest": "9", "x-fencing-highest": "9",
		"Retry-Afte": "", "Retry-Afterx": "", "Retry_After": "",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("Get(%q) = %q, want %q", name, got, want)
		}
	}
}
