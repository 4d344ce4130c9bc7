package jsglue

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestJSErrorMatchesSentinelByName(t *testing.T) {
	for _, name := range Names() {
		err := fmt.Errorf("wrapped: %w", NewJSError(name, "boom"))
		if !errors.Is(err, Sentinel(name)) {
			t.Errorf("%s: errors.Is with its sentinel is false", name)
		}
		if got := NameOf(err); got != name {
			t.Errorf("NameOf(%s) = %q", name, got)
		}
	}
	if errors.Is(NewJSError("QuotaExceededError", ""), ErrAbort) {
		t.Error("a QuotaExceededError matched ErrAbort")
	}
	if errors.Is(NewJSError("SomethingNew", ""), ErrUnknown) {
		t.Error("an unknown name must match no sentinel")
	}
}

func TestNameOfGoErrors(t *testing.T) {
	cases := map[error]string{
		context.Canceled: "AbortError",
		fmt.Errorf("x: %w", context.DeadlineExceeded): "TimeoutError",
		ErrQuotaExceeded:    "QuotaExceededError",
		errors.New("plain"): "Error",
		named{}:             "LostLeadershipError",
	}
	for err, want := range cases {
		if got := NameOf(err); got != want {
			t.Errorf("NameOf(%v) = %q, want %q", err, got, want)
		}
	}
}

type named struct{}

func (named) Error() string  { return "lost" }
func (named) JSName() string { return "LostLeadershipError" }

func TestJSErrorMessage(t *testing.T) {
	if got := NewJSError("AbortError", "").Error(); got != "AbortError" {
		t.Errorf("got %q", got)
	}
	if got := NewJSError("DataError", "bad key").Error(); got != "DataError: bad key" {
		t.Errorf("got %q", got)
	}
}
