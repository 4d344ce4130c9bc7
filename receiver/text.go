package receiver

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidText is returned (wrapped) by a store's Tx when a string
// argument holds a NUL character or invalid UTF-8. PostgreSQL's TEXT cannot
// hold either and SQLite could; both stores refuse them alike, before the
// statement runs, so a handler behaves the same on either. A handler error
// wrapping it is answered with 422 invalid-text and stored like any 4xx:
// client input never causes a 5xx that an outbox would retry forever.
// Store binary data as []byte.
var ErrInvalidText = errors.New("receiver: text holds NUL or invalid UTF-8")

// ValidText reports whether s can be stored as text by every store: valid
// UTF-8 without NUL.
func ValidText(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// CheckArgs returns an error wrapping ErrInvalidText when a string argument
// of a statement is not ValidText. Stores call it before every statement.
func CheckArgs(args []any) error {
	for i, a := range args {
		if s, ok := a.(string); ok && !ValidText(s) {
			return fmt.Errorf("%w (argument $%d)", ErrInvalidText, i+1)
		}
	}
	return nil
}
