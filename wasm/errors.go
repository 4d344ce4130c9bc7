package main

import (
	"errors"

	"github.com/tabfence/tabfence/idb"
)

// The API's own errors and the JavaScript names they carry (jsglue.NameOf
// reads JSName). Pure Go: the d.ts's list of error names is checked
// against these natively (TestDTSMatchesGo).

// StaleError is why a fenced leader stepped down: the fence (or a newer
// token heard on the channel) says a newer leader exists.
type StaleError struct{ Msg string }

func (e *StaleError) Error() string  { return e.Msg }
func (e *StaleError) JSName() string { return "StaleOwnerError" }

// NotLeaderError: post() without a current fenced leadership.
type NotLeaderError struct{ Msg string }

func (e *NotLeaderError) Error() string  { return e.Msg }
func (e *NotLeaderError) JSName() string { return "NotLeaderError" }

// StorageError: the database a fence or election was bound to is gone. Its
// JavaScript name says why.
type StorageError struct {
	Name, Msg string
}

func (e *StorageError) Error() string  { return e.Msg }
func (e *StorageError) JSName() string { return e.Name }

// The names of StorageErrors.
const (
	nameDatabaseDeleted  = "DatabaseDeletedError"
	nameDatabaseUpgraded = "DatabaseUpgradedError"
	nameStorageClosed    = "InvalidStateError"
)

func storageErr(db string, err error) error {
	switch {
	case errors.Is(err, idb.ErrDeleted):
		return &StorageError{nameDatabaseDeleted, "tabfence: database " + db + " was deleted by another tab (sign-out?); reload and call fence()/elect() again"}
	case errors.Is(err, idb.ErrUpgraded):
		return &StorageError{nameDatabaseUpgraded, "tabfence: database " + db + " was upgraded by a newer build in another tab; reload the page"}
	}
	return &StorageError{nameStorageClosed, "tabfence: database " + db + " was closed (" + err.Error() + ")"}
}

// storageLostReasons are onLost's reasons beside locks' (locks.Reason):
// the fenced election's database went away, and the election is closed.
var storageLostReasons = [...]struct {
	kind   idb.EventKind
	reason string
}{
	{idb.Deleted, "deleted"},
	{idb.Upgraded, "upgraded"},
	{idb.ClosedByBrowser, "storage-closed"},
}

// storageLostReason is onLost's reason when the database's connection
// ended with kind: "storage-closed" for anything but a delete or upgrade.
func storageLostReason(kind idb.EventKind) string {
	for _, r := range storageLostReasons {
		if r.kind == kind {
			return r.reason
		}
	}
	return "storage-closed"
}
