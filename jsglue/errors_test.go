package jsglue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJSErrorMatchesSentinelByName(t *testing.T) {
	for _, name := range Names() {
		err := fmt.Errorf("wrapped: %w", NewJSError(name, "boom"))
		assert.ErrorIs(t, err, Sentinel(name), "%s: errors.Is with its sentinel is false", name)
		assert.Equal(t, name, NameOf(err), "NameOf(%s)", name)
	}
	assert.NotErrorIs(t, NewJSError("QuotaExceededError", ""), ErrAbort, "a QuotaExceededError matched ErrAbort")
	assert.NotErrorIs(t, NewJSError("SomethingNew", ""), ErrUnknown, "an unknown name must match no sentinel")
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
		assert.Equal(t, want, NameOf(err), "NameOf(%v)", err)
	}
}

type named struct{}

func (named) Error() string  { return "lost" }
func (named) JSName() string { return "LostLeadershipError" }

func TestJSErrorMessage(t *testing.T) {
	assert.Equal(t, "AbortError", NewJSError("AbortError", "").Error())
	assert.Equal(t, "DataError: bad key", NewJSError("DataError", "bad key").Error())
}
